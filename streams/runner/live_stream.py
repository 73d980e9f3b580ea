"""The embedded runner's live input: what a live stage sends, as an async iterator."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import datetime

from models import Envelope

__all__ = ["LiveStream"]

_END = object()


class LiveStream:
    """The embedded runner's side of a live stage: what the stage sends, as the async iterator
    the runner reads, ending at ``end()``. Bounded, so a slow pipeline slows the stage (and,
    through ``max_held``, the sources) instead of growing memory."""

    def __init__(self, *, maxsize: int = 2048) -> None:
        self._queue: asyncio.Queue[object] = asyncio.Queue(maxsize)
        self._ended = False

    async def send(self, env: Envelope) -> None:
        await self._queue.put(env)

    async def send_late(self, env: Envelope) -> None:
        """The runner applies it at once and counts it (``Instants.late``)."""
        await self._queue.put(env)

    async def progress(self, upto: datetime) -> None:
        """The embedded runner closes an instant when the next event's time passes it."""
        del upto

    def end(self) -> None:
        """No more events: the iterator stops after what is queued. Never waits, so a stage
        being torn down can always end the stream. A reader waiting on an empty queue gets the
        end marker; one facing a full queue sees ``_ended`` once it has drained it."""
        self._ended = True
        with contextlib.suppress(asyncio.QueueFull):
            self._queue.put_nowait(_END)

    def __aiter__(self) -> LiveStream:
        return self

    async def __anext__(self) -> Envelope:
        if self._ended and self._queue.empty():
            raise StopAsyncIteration
        item = await self._queue.get()
        if item is _END:
            self._ended = True
            raise StopAsyncIteration
        assert isinstance(item, Envelope)
        return item
