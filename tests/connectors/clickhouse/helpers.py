"""Small queries and types shared by the store tests."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from connectors.clickhouse import ClickHouseSink, Store

SinkMaker = Callable[..., ClickHouseSink]
"""What the ``make_sink`` fixture yields: builds a sink on the test's store."""


def count(store: Store, table: str, *, final: bool = False) -> int:
    suffix = " FINAL" if final else ""
    return int(store.query(f"SELECT count() FROM {table}{suffix}").rows[0][0])


async def wait_until(condition: Callable[[], bool], timeout_s: float = 60.0) -> None:
    """Polls for a sink's condition; the generous deadline only bounds a sink that never gets
    there (on a busy 2-core machine a chDB insert can take seconds)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.01)
