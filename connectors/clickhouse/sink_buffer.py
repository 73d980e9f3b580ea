"""The per-table buffer the sink's writers drain, the writers' bookkeeping, and the count of
deliveries waiting out a store outage."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

__all__ = ["BufferedRow", "Outage", "Outages", "TableBuffer"]


@dataclass(slots=True)
class BufferedRow:
    row: dict[str, object]
    arrived: float
    """Monotonic time it was buffered: the flush interval counts from the oldest row."""
    origin: Path | None = None
    """The spool file it was reloaded from; the file is removed once all its rows are out."""


class TableBuffer:
    """One per table, so an outage or a slow insert on one table holds no other back."""

    def __init__(self) -> None:
        self.items: list[BufferedRow] = []
        self.lock = asyncio.Lock()
        """Held while the head batch is written, so the background writer and flush() never
        send the same rows twice."""
        self.wake = asyncio.Event()
        self.appended = 0
        self.done = 0
        self.task: asyncio.Task[None] | None = None


class Outages:
    """Deliveries being retried after a store-side failure, on all tables: ``any`` is set
    while there is one, so a command stopping on SIGTERM need not wait for the store."""

    def __init__(self) -> None:
        self.count = 0
        self.any = asyncio.Event()


class Outage:
    """One delivery's outage, counted in ``Outages`` from ``begin`` until ``end``."""

    def __init__(self, outages: Outages) -> None:
        self.outages = outages
        self.on = False

    def begin(self) -> bool:
        """Mark the outage; True the first time, when it is worth a log line."""
        if self.on:
            return False
        self.on = True
        self.outages.count += 1
        self.outages.any.set()
        return True

    def end(self) -> None:
        if not self.on:
            return
        self.on = False
        self.outages.count -= 1
        if not self.outages.count:
            self.outages.any.clear()
