"""Fixtures for the ClickHouse store tests: a fresh chDB store per test.

chDB hosts one engine per process and refuses a second store path while any client on the
first is open, but once every client is closed another path opens fine (checked: ~30 ms after
the first start). So each test gets its own store under tmp_path, and the fixtures make sure
every Store and sink they hand out is closed at teardown, or the next test could not open its
own path.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from connectors.clickhouse import (
    ClickHouseSink,
    Store,
    apply_migrations,
    default_sql_dir,
    open_store,
)
from models.settings import StoreSettings
from tests.connectors.clickhouse.helpers import SinkMaker

# Small batches and retry waits: outages and bad rows resolve in milliseconds.
FAST = {
    "batch_rows": 50,
    "flush_interval_s": 0.05,
    "retry_initial_s": 0.01,
    "retry_max_s": 0.05,
    "row_attempts": 2,
}


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture
def store_settings(store_path: Path) -> StoreSettings:
    # Batches below the settings' floor of 1,000 rows on purpose (model_copy does not
    # validate): splits and partial batches show with a few dozen rows.
    return StoreSettings(dsn=f"chdb://{store_path}").model_copy(update=FAST)


@pytest.fixture
def store(store_settings: StoreSettings) -> Iterator[Store]:
    """The test's store, migrated."""
    opened = open_store(store_settings)
    try:
        apply_migrations(opened, default_sql_dir())
        yield opened
    finally:
        opened.close()


@pytest.fixture
async def make_sink(store_settings: StoreSettings, store: Store) -> AsyncIterator[SinkMaker]:
    """Build sinks on the test's store (settings overridable); all are stopped at teardown."""
    made: list[ClickHouseSink] = []

    def make(registry: CollectorRegistry | None = None, **overrides: object) -> ClickHouseSink:
        settings = store_settings.model_copy(update=overrides)
        sink = ClickHouseSink(lambda: open_store(settings), settings, registry=registry)
        made.append(sink)
        return sink

    yield make
    for sink in made:
        await sink.stop(timeout_s=0)
