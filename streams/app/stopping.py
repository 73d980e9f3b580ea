"""The stop of a long-running consumer command: Ctrl-C, SIGTERM, or ``--duration-s``."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["stop_event"]

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
