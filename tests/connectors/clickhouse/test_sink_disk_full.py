"""A full disk under the store, on a real full disk (a small tmpfs): the sink stops instead of
retrying, spools what it holds (as many whole rows as fit when the spool's disk is full too),
and the next sink writes them once."""

from __future__ import annotations

import asyncio
import errno
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from connectors.clickhouse import Store
from connectors.clickhouse.dead_letter import is_store_side_error
from connectors.clickhouse.disk_full import StoreFullError, hold_merges, is_disk_full
from connectors.clickhouse.dsn import StoreError
from connectors.clickhouse.rows import signal_row
from connectors.clickhouse.spool import read_spool, spool_what_fits
from tests.connectors.clickhouse import factories as f
from tests.connectors.clickhouse.helpers import SinkMaker, count
from tests.small_disk import small_disk_at

ROWS = 40


@pytest.fixture
def store_path(tmp_path: Path) -> Iterator[Path]:
    """The conftest's store, on a 16 MiB disk of its own."""
    with small_disk_at(tmp_path / "disk", "16m") as disk:
        yield disk.path / "store"


@pytest.mark.parametrize(
    ("message", "full"),
    [
        ("Code: 243. DB::Exception: Cannot reserve 1.80 MiB. (NOT_ENOUGH_SPACE)", True),
        (
            "Code: 243. DB::Exception: Could not perform insert. None of the disks in volume "
            "'default' have enough free space: `min_free_disk_bytes_to_perform_insert` = 2. "
            "(NOT_ENOUGH_SPACE)",
            True,
        ),
        (
            "Code: 75. DB::ErrnoException: Cannot write to file /s/data/x.bin, errno: 28, "
            "strerror: No space left on device. (CANNOT_WRITE_TO_FILE_DESCRIPTOR)",
            True,
        ),
        ("[Errno 28] No space left on device: '/s/spool'", True),
        ("Code: 60. DB::Exception: Table gpufrag.events does not exist. (UNKNOWN_TABLE)", False),
        ("Code: 164. DB::Exception: Cannot execute query in readonly mode. (READONLY)", False),
        ("Code: 252. DB::Exception: Too many parts (3001). (TOO_MANY_PARTS)", False),
    ],
    ids=["reserve", "keep-free", "enospc-write", "oserror", "outage", "readonly", "parts"],
)
def test_a_full_disk_is_told_from_an_outage(message: str, full: bool) -> None:
    assert is_disk_full(message) is full
    if "(NOT_ENOUGH_SPACE)" in message:
        assert is_store_side_error(message)  # never the rows' fault: never dead-lettered


async def test_a_full_disk_stops_the_sink_and_the_next_sink_writes_what_it_spooled(
    make_sink: SinkMaker, store: Store, store_path: Path, tmp_path: Path
) -> None:
    # More kept free than the whole disk: the store's disk counts as full from the first insert
    # (and a spool beside it would keep nothing: the floor is the same), so spool elsewhere.
    spool = tmp_path / "spool"
    sink = make_sink(keep_free_mib=64, spool_dir=str(spool))
    await sink.start()
    await sink.write("signals", [signal_row("r", f.signal(i)) for i in range(ROWS)])
    deadline = time.monotonic() + 60
    while sink.fatal is None:
        assert time.monotonic() < deadline, "the sink never saw the full disk"
        await asyncio.sleep(0.01)
    with pytest.raises(StoreFullError, match=f"the disk holding the store {store_path} is full"):
        await sink.write("signals", [signal_row("r", f.signal(ROWS))])
    assert sink.retries == 0  # a full disk is not retried
    await asyncio.wait_for(sink.stop(), 60)  # no flush to wait for
    assert sink.spooled_rows == ROWS
    assert sink.spooled_file is not None and sink.spooled_file.parent == spool
    assert f"{ROWS} unwritten rows spooled to {sink.spooled_file}" in str(sink.fatal)
    assert count(store, "signals") == 0 and count(store, "dead_letter") == 0

    again = make_sink(keep_free_mib=0, spool_dir=str(spool))  # space freed: nothing kept back
    await again.start()
    await asyncio.wait_for(again.flush(), 60)
    assert count(store, "signals") == count(store, "signals", final=True) == ROWS
    assert not sink.spooled_file.exists()


@pytest.mark.parametrize("floor_kib", [0, 384], ids=["to-the-last-byte", "leaving-a-floor"])
def test_a_spool_on_a_full_disk_keeps_the_whole_rows_that_fit(
    tmp_path: Path, floor_kib: int
) -> None:
    rows = [("signals", {"i": i, "pad": "x" * 8000}) for i in range(300)]  # 2.4 MB on 1 MiB
    with small_disk_at(tmp_path / "disk", "1m") as disk:
        path, kept = spool_what_fits(disk.path / "spool", rows, floor_bytes=floor_kib * 1024)
        assert path is not None and 0 < kept < len(rows)
        left = os.statvfs(disk.path)
        assert left.f_bavail * left.f_frsize >= floor_kib * 1024
        files, bad = read_spool(disk.path / "spool")
        assert not bad and [spool.rows for spool in files] == [rows[:kept]]
        assert [p.name for p in (disk.path / "spool").iterdir()] == [path.name]  # no temp file


def test_a_disk_that_fills_at_fsync_keeps_nothing_and_leaves_no_half_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With delayed allocation (ext4, xfs) ENOSPC can come at fsync, after every write took;
    tmpfs allocates at write, so the kernel's answer is stood in for here."""
    rows = [("signals", signal_row("r", f.signal(i))) for i in range(3)]

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    assert spool_what_fits(tmp_path / "spool", rows) == (None, 0)
    assert list((tmp_path / "spool").iterdir()) == []  # no hidden .tmp taking room
    assert read_spool(tmp_path / "spool") == ([], [])


def test_held_merges_leave_the_parts_as_they_are(store: Store) -> None:
    """What keeps the room the sink left free for the run's end row: once held, the engine
    merges nothing, asked or not, so no merge can write a new part into that room."""
    store.command("CREATE TABLE held (k Int32) ENGINE = MergeTree ORDER BY k")
    hold_merges(store)
    for k in range(3):
        store.command(f"INSERT INTO held VALUES ({k})")
    with pytest.raises(StoreError, match="ABORTED"):
        store.command("OPTIMIZE TABLE held FINAL")
    parts = "SELECT count() FROM system.parts WHERE table = 'held' AND active"
    assert store.query(parts).rows == [(3,)]
    store.command("SYSTEM START MERGES")  # what a new process's engine starts with
    store.command("OPTIMIZE TABLE held FINAL")
    assert store.query(parts).rows == [(1,)]
