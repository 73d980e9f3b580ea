"""The per-table buffer the sink's writers drain, the writers' bookkeeping, and the count of
deliveries waiting out a store outage.

Rows are buffered as value tuples in blocks of one column list: a block is what one insert
sends (at most ``batch_rows`` rows), filled by every write until it is full or taken for
writing. A replay makes about 47,000 writes of one to three rows; one bookkeeping object per
row (and a copy of each row's dict) cost as much as building the rows.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Block", "Outage", "Outages", "TableBuffer", "Values", "blocks_of"]

Values = tuple[object, ...]


@dataclass(slots=True)
class Block:
    """Rows of one table with the same columns, in the order they were written."""

    names: tuple[str, ...]
    rows: list[Values]
    arrived: float
    """Monotonic time its first row was buffered: the flush interval counts from the oldest."""
    origin: Path | None = None
    """The spool file its rows were reloaded from; the file is removed once all are out."""
    sealed: bool = False
    """Being written: later rows go into a new block."""

    def dicts(self) -> Iterator[dict[str, object]]:
        names = self.names
        return (dict(zip(names, row, strict=True)) for row in self.rows)


def blocks_of(
    rows: Sequence[Mapping[str, object]],
) -> Iterator[tuple[tuple[str, ...], list[Values]]]:
    """Dict rows as (columns, value tuples), one pair per run of rows with the same keys in
    the same order."""
    names: tuple[str, ...] | None = None
    run: list[Values] = []
    for row in rows:
        keys = tuple(row.keys())
        if keys != names:
            if names is not None and run:
                yield names, run
            names, run = keys, []
        run.append(tuple(row.values()))
    if names is not None and run:
        yield names, run


class TableBuffer:
    """One per table, so an outage or a slow insert on one table holds no other back."""

    def __init__(self) -> None:
        self.blocks: deque[Block] = deque()
        self.count = 0
        """Rows in ``blocks``."""
        self.lock = asyncio.Lock()
        """Held while the head block is written, so the background writer and flush() never
        send the same rows twice."""
        self.wake = asyncio.Event()
        self.appended = 0
        self.done = 0
        self.task: asyncio.Task[None] | None = None

    def add(
        self,
        names: tuple[str, ...],
        rows: Sequence[Values],
        *,
        cap: int,
        origin: Path | None = None,
        now: float | None = None,
    ) -> None:
        """Append ``rows`` to the open tail block while it has room, then to new blocks of at
        most ``cap`` rows (``now``: their arrival time, the monotonic clock's by default)."""
        n = len(rows)
        self.count += n
        self.appended += n
        tail = self.blocks[-1] if self.blocks else None
        start = 0
        if tail is not None and not tail.sealed and tail.names == names and tail.origin == origin:
            start = max(cap - len(tail.rows), 0)
            if n <= start:  # the usual case: one row or a few, into the open block
                tail.rows.extend(rows)
                return
            tail.rows.extend(rows[:start])
        arrived = time.monotonic() if now is None else now
        for at in range(start, n, cap):
            self.blocks.append(Block(names, list(rows[at : at + cap]), arrived, origin))

    def take_head(self) -> Block | None:
        """The oldest block, sealed so no write adds to it while it is being written."""
        if not self.blocks:
            return None
        head = self.blocks[0]
        head.sealed = True
        return head

    def drop_head(self, head: Block) -> None:
        """``head`` is stored (or dead-lettered): it leaves the buffer."""
        assert self.blocks and self.blocks[0] is head
        self.blocks.popleft()
        self.count -= len(head.rows)
        self.done += len(head.rows)


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
