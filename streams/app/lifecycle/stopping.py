"""The stop of a long-running consumer command: Ctrl-C, SIGTERM, or ``--duration-s``."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["stop_event", "unless_stopped"]

SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def stop_event(duration_s: float | None) -> Iterator[asyncio.Event]:
    """An event set by either signal or after ``duration_s``; the handlers are removed on exit,
    so a second Ctrl-C during the shutdown that follows interrupts as usual."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in SIGNALS:
        loop.add_signal_handler(sig, stop.set)
    timer = loop.call_later(duration_s, stop.set) if duration_s is not None else None
    try:
        yield stop
    finally:
        for sig in SIGNALS:
            loop.remove_signal_handler(sig)
        if timer is not None:
            timer.cancel()


async def unless_stopped(wait: Coroutine[Any, Any, object], stop: asyncio.Event) -> bool:
    """True once ``wait`` finished; False if ``stop`` came first (``wait`` is then cancelled)."""
    waiting = asyncio.create_task(wait)
    stopping = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait((waiting, stopping), return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (waiting, stopping):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    return waiting.done() and not waiting.cancelled()
