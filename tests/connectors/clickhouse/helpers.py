"""Small queries and types shared by the store tests."""

from __future__ import annotations

from collections.abc import Callable

from connectors.clickhouse import ClickHouseSink, Store

SinkMaker = Callable[..., ClickHouseSink]
"""What the ``make_sink`` fixture yields: builds a sink on the test's store."""


def count(store: Store, table: str, *, final: bool = False) -> int:
    suffix = " FINAL" if final else ""
    return int(store.query(f"SELECT count() FROM {table}{suffix}").rows[0][0])
