"""Carries the sources' refusals to their dead-letter destination (the store, or the
dead-letter topic) while they run.

Sources refuse synchronously, in the middle of a parse; the destination is written
asynchronously. A queue between them keeps the parse from waiting on the store, and the
pump writes whatever gathered in one batch: a DCGM page with one bad line refuses it once a
second, which would otherwise be one store insert a second.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

from models.refusal import Refusal

__all__ = ["RefusalPump"]

log = logging.getLogger(__name__)

Write = Callable[[list[Refusal]], Awaitable[None]]


HELD_MAX = 10_000
"""Refusals waiting for a store or broker that is down: a DCGM page with one bad line per GPU
on 100 nodes refuses 100 lines a second, so this is 100 s of that before older ones give way
(they stay counted in gpufrag_refused_total and in the log)."""


class RefusalPump:
    def __init__(self) -> None:
        self._queue: asyncio.Queue[Refusal] = asyncio.Queue(maxsize=HELD_MAX)
        self.kept = 0
        self.not_kept = 0
        self._inflight: list[Refusal] = []

    def __call__(self, refusal: Refusal) -> None:
        """The refusal log's sink."""
        try:
            self._queue.put_nowait(refusal)
        except asyncio.QueueFull:
            self.not_kept += 1
            if self.not_kept == 1 or self.not_kept % HELD_MAX == 0:
                log.warning(
                    "%d refused inputs not kept as dead letters: %d already wait for the "
                    "store or broker (they are still counted)",
                    self.not_kept,
                    HELD_MAX,
                )

    def _batch(self) -> list[Refusal]:
        out: list[Refusal] = []
        while not self._queue.empty():
            out.append(self._queue.get_nowait())
        return out

    async def _write(self, write: Write, batch: list[Refusal]) -> None:
        try:
            await write(batch)
            self.kept += len(batch)
        except Exception:  # counted and logged by the refusal log already; say it was not kept
            self.not_kept += len(batch)
            log.exception("%d refused inputs could not be kept as dead letters", len(batch))

    @contextlib.asynccontextmanager
    async def running(self, write: Write) -> AsyncIterator[None]:
        """Pump while the block runs; on leaving it, write what is left."""

        async def pump() -> None:
            while True:
                first = await self._queue.get()
                self._inflight = [first, *self._batch()]
                await self._write(write, self._inflight)
                self._inflight = []

        task = asyncio.create_task(pump(), name="dead letters")
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            # a batch cut off mid-write is written again: dead letters' ids dedupe it
            if rest := [*self._inflight, *self._batch()]:
                self._inflight = []
                await self._write(write, rest)
