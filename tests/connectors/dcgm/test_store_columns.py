"""What the DCGM mapping adds to a sample reaches the gpu_samples table, column for column."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from connectors.clickhouse import Store, apply_migrations, default_sql_dir, open_store
from connectors.clickhouse.rows import gpu_sample_row
from models import Envelope, GpuSampleEvent
from models.settings import StoreSettings
from tests.connectors.dcgm.helpers import by_gpu, page, parse


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = open_store(StoreSettings(dsn=f"chdb://{tmp_path / 'store'}"))
    try:
        apply_migrations(opened, default_sql_dir())
        yield opened
    finally:
        opened.close()


def _rows(name: str) -> list[dict[str, object]]:
    result = parse(page(name))
    return [
        gpu_sample_row(
            "run-dcgm",
            Envelope.wrap(GpuSampleEvent(sample=t.sample), event_time=t.at, source="dcgm"),
        )
        for t in result.samples
    ]


def test_health_and_mig_columns_round_trip(store: Store) -> None:
    rows = _rows("xid_h100.txt") + _rows("mig_a100.txt")
    assert list(rows[0]) == store.query("SELECT * FROM gpu_samples LIMIT 0").columns
    store.insert("gpu_samples", rows)
    got = store.query(
        "SELECT node, gpu_index, mig_instance, mig_profile, xid, xid_counts, xid_window_ms,"
        " rows_remapped_correctable, rows_remapped_uncorrectable, row_remap_pending,"
        " row_remap_failed FROM gpu_samples ORDER BY node, gpu_index, mig_instance"
    ).rows
    assert got == [
        ("gpu-a100-mig-01", 0, 1, "3g.40gb", None, {}, None, None, None, None, None),
        ("gpu-a100-mig-01", 0, 5, "2g.20gb", None, {}, None, None, None, None, None),
        ("gpu-a100-mig-01", 0, 13, "1g.10gb", None, {}, None, None, None, None, None),
        ("gpu-h100-12", 0, None, None, None, {}, 300000, 0, 0, 0, 0),
        ("gpu-h100-12", 1, None, None, 79, {79: 1, 13: 4}, 300000, 3, 0, 0, 0),
        ("gpu-h100-12", 2, None, None, 63, {63: 1}, 300000, 0, 1, 1, 0),
    ]


def test_sql_can_find_the_cards_that_fell_off_the_bus(store: Store) -> None:
    store.insert("gpu_samples", _rows("xid_h100.txt"))
    found = store.query("SELECT uuid FROM gpu_samples WHERE xid_counts[79] > 0").rows
    assert found == [(by_gpu(parse(page("xid_h100.txt")))[(1, None)].uuid,)]
