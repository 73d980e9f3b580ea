"""The per-table buffer the sink's writers drain: its rows and the writer's bookkeeping."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

__all__ = ["BufferedRow", "TableBuffer"]


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
