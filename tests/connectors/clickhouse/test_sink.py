"""The sink against a real chDB store: batching, outages, bad rows, restarts, backpressure."""

from __future__ import annotations

import asyncio
import math
import time
from datetime import UTC, datetime
from pathlib import Path

import orjson
import pytest
from prometheus_client import CollectorRegistry

from connectors.clickhouse import ClickHouseSink, Store
from connectors.clickhouse.rows import Row, action_row, gpu_sample_row, refusal_row, signal_row
from connectors.clickhouse.sink import dead_letter_row, is_store_side_error
from connectors.clickhouse.spool import read_spool, write_spool
from models.refusal import Refusal
from models.settings import StoreSettings
from tests.connectors.clickhouse import factories as f
from tests.connectors.clickhouse.helpers import SinkMaker, count, wait_until

RUN = "run-1"


def signal_rows(start: int, stop: int) -> list[Row]:
    return [signal_row(RUN, f.signal(i)) for i in range(start, stop)]


def sample_rows(n: int, *, one_day_each: bool = False) -> list[Row]:
    return [
        gpu_sample_row(RUN, f.gpu_sample_env(i, days=i if one_day_each else 0)) for i in range(n)
    ]


async def test_rows_are_written_in_batches_and_by_interval(
    make_sink: SinkMaker, store: Store
) -> None:
    sink = make_sink(batch_rows=10, flush_interval_s=30.0)
    await sink.start()
    await sink.write("signals", signal_rows(0, 25))
    # Two full batches go at once; the tail waits for the interval (30 s here).
    await wait_until(lambda: sink.written_rows.get("signals") == 20)
    await asyncio.sleep(0.1)
    assert sink.buffered_rows == 5
    await sink.flush()
    assert count(store, "signals") == 25 and sink.buffered_rows == 0

    timely = make_sink(batch_rows=1000, flush_interval_s=0.05)
    await timely.start()
    await timely.write("actions", [action_row(RUN, f.action(i)) for i in range(3)])
    await wait_until(lambda: timely.written_rows.get("actions") == 3)  # no flush() call
    assert count(store, "actions") == 3


async def test_metrics(make_sink: SinkMaker, store: Store) -> None:
    registry = CollectorRegistry()
    sink = make_sink(registry=registry)
    await sink.start()
    bad = {**sample_rows(1)[0], "gpu_index": 70_000}
    await sink.write("gpu_samples", [*sample_rows(4), bad])
    await sink.flush()

    def value(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, labels)

    assert value("gpufrag_sink_rows_written_total", table="gpu_samples") == 4
    assert value("gpufrag_sink_rows_dead_lettered_total", table="gpu_samples") == 1
    assert (value("gpufrag_sink_insert_errors_total", table="gpu_samples") or 0) >= 2
    assert (value("gpufrag_sink_retries_total") or 0) >= 1
    assert value("gpufrag_sink_buffered_rows") == 0
    assert (value("gpufrag_sink_last_success_timestamp_seconds") or 0) > time.time() - 60


async def test_outage_buffers_retries_and_loses_nothing(make_sink: SinkMaker, store: Store) -> None:
    sink = make_sink()
    await sink.start()
    await sink.write("signals", signal_rows(0, 10))
    await sink.flush()
    assert count(store, "signals") == 10

    store.command("DETACH TABLE signals")  # a real store failure: inserts into it now fail
    for start in range(10, 60, 10):
        await sink.write("signals", signal_rows(start, start + 10))
        await asyncio.sleep(0.02)
    await wait_until(lambda: sink.retries >= 3)
    assert sink.buffered_rows == 50
    assert sink.insert_errors["signals"] >= 3
    # Other tables keep flowing while one is down.
    await sink.write("actions", [action_row(RUN, f.action(0))])
    await wait_until(lambda: sink.written_rows.get("actions") == 1)

    store.command("ATTACH TABLE signals")
    await asyncio.wait_for(sink.flush(), 5)
    assert sink.buffered_rows == 0
    assert count(store, "signals") == 60  # every row once: failed inserts wrote nothing
    assert count(store, "signals", final=True) == 60
    assert sink.dead_lettered_rows == {}
    assert count(store, "dead_letter") == 0


async def test_bad_rows_are_dead_lettered_and_good_rows_stored(
    make_sink: SinkMaker, store: Store
) -> None:
    sink = make_sink()
    await sink.start()
    good = sample_rows(20)
    too_big = {**good[3], "event_id": "bad-1", "gpu_index": 70_000}  # UInt16 holds 0..65535
    no_node = {**good[4], "event_id": "bad-2", "node": None}  # node is String, not Nullable
    await sink.write("gpu_samples", [*good[:10], too_big, *good[10:], no_node])
    await sink.flush()

    assert count(store, "gpu_samples") == 20
    assert sink.dead_lettered_rows == {"gpu_samples": 2}
    letters = store.query(
        "SELECT target, reason, row FROM dead_letter FINAL ORDER BY reason"
    ).dicts()
    assert [x["target"] for x in letters] == ["gpu_samples", "gpu_samples"]
    reasons = [str(x["reason"]) for x in letters]
    assert reasons[0].startswith("cannot insert into gpu_samples: column `gpu_index` ")
    assert "UInt16" in reasons[0] and "65535" in reasons[0]
    assert reasons[1].startswith("cannot insert into gpu_samples: column `node` ")
    assert "Invalid None value in non-Nullable column" in reasons[1]
    stored = [orjson.loads(str(x["row"])) for x in letters]
    assert stored[0]["gpu_index"] == 70_000 and stored[1]["node"] is None
    assert stored[0]["event_id"] == "bad-1"

    # The same bad row again: its dead letter has the same id, so it dedupes.
    await sink.write("gpu_samples", [too_big])
    await sink.flush()
    assert count(store, "dead_letter", final=True) == 2


async def test_a_dead_letter_is_filed_under_its_rows_run_else_the_writers(
    make_sink: SinkMaker, store: Store
) -> None:
    sink = make_sink()
    sink.run_id = "writer-run"
    await sink.start()
    too_big = {**sample_rows(1)[0], "gpu_index": 70_000}  # refused by the store: run-1's row
    refused = Refusal(
        source="kube/pods", reason="invalid", detail="d", raw="{}", at=datetime.now(UTC)
    )
    await sink.write("gpu_samples", [too_big])
    await sink.write("dead_letter", [refusal_row(refused)])  # an input: no run of its own
    await sink.flush()
    got = store.query("SELECT target, run_id FROM dead_letter FINAL ORDER BY target").rows
    assert [(str(t), str(r)) for t, r in got] == [
        ("gpu_samples", RUN),
        ("source:kube/pods", "writer-run"),
    ]


async def test_a_batch_the_server_refuses_is_split_not_dead_lettered(
    make_sink: SinkMaker, store: Store
) -> None:
    # One block may touch at most 100 partitions (ClickHouse rejects it with TOO_MANY_PARTS):
    # 150 samples on 150 days are fine rows in a bad batch; halving the batch stores them all.
    sink = make_sink(batch_rows=200)
    await sink.start()
    await sink.write("gpu_samples", sample_rows(150, one_day_each=True))
    await sink.flush()
    assert count(store, "gpu_samples") == 150
    assert sink.insert_errors["gpu_samples"] == 1
    assert sink.dead_lettered_rows == {}


async def test_dead_letter_outage_keeps_the_row(make_sink: SinkMaker, store: Store) -> None:
    sink = make_sink()
    await sink.start()
    store.command("DETACH TABLE dead_letter")
    good, bad = sample_rows(1)[0], {**sample_rows(2)[1], "gpu_index": -1}
    await sink.write("gpu_samples", [good, bad])
    await wait_until(lambda: sink.insert_errors.get("dead_letter", 0) >= 2)
    assert count(store, "gpu_samples") == 1
    assert sink.buffered_rows == 2  # the batch leaves the buffer only when all of it is out
    store.command("ATTACH TABLE dead_letter")
    await asyncio.wait_for(sink.flush(), 5)
    assert sink.buffered_rows == 0
    assert count(store, "dead_letter") == 1


async def test_restart_spools_and_resends_every_row_once(
    make_sink: SinkMaker, store: Store, store_path: Path
) -> None:
    first = make_sink()
    await first.start()
    await first.write("signals", signal_rows(0, 10))
    await first.flush()
    store.command("DETACH TABLE signals")
    await first.write("signals", signal_rows(10, 40))
    await first.stop(timeout_s=0.2)
    spooled = first.spooled_file
    assert spooled is not None and spooled.exists()
    assert spooled.parent == Path(f"{store_path}.spool")  # beside the chDB store
    files, bad = read_spool(spooled.parent)
    assert bad == [] and len(files[0].rows) == 30

    # Restarted while the table is still down: the rows move to a new spool file.
    second = make_sink()
    await second.start()
    assert second.buffered_rows == 30
    await second.stop(timeout_s=0.1)
    assert not spooled.exists()
    respooled = second.spooled_file
    assert respooled is not None and respooled.exists()

    store.command("ATTACH TABLE signals")
    third = make_sink()
    await third.start()
    await asyncio.wait_for(third.flush(), 5)
    assert count(store, "signals") == 40  # each row exactly once
    assert not respooled.exists()
    assert list(respooled.parent.iterdir()) == []
    await third.stop()


async def test_a_stop_cancelled_while_the_store_is_down_still_spools(
    make_sink: SinkMaker, store: Store
) -> None:
    sink = make_sink()
    await sink.start()
    store.command("DETACH TABLE signals")
    await sink.write("signals", signal_rows(0, 7))
    stopping = asyncio.create_task(sink.stop())  # no timeout: it would wait for the store
    await asyncio.sleep(0.1)
    stopping.cancel()  # what asyncio.run does to the main task on Ctrl-C
    with pytest.raises(asyncio.CancelledError):
        await stopping
    spooled = sink.spooled_file
    assert spooled is not None and not sink.running
    files, _ = read_spool(spooled.parent)
    assert [len(x.rows) for x in files] == [7]


async def test_backpressure_blocks_writers_until_the_store_returns(
    make_sink: SinkMaker, store: Store
) -> None:
    sink = make_sink(max_buffered_rows=5)
    await sink.start()
    store.command("DETACH TABLE signals")
    await sink.write("signals", signal_rows(0, 5))  # fills the buffer
    blocked = asyncio.create_task(sink.write("signals", signal_rows(5, 8)))
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(asyncio.shield(blocked), 0.2)
    assert not blocked.done()
    assert sink.buffered_rows == 5

    store.command("ATTACH TABLE signals")
    await asyncio.wait_for(blocked, 5)
    await sink.flush()
    assert count(store, "signals") == 8


async def test_a_full_buffer_is_written_at_once_whatever_the_interval(
    make_sink: SinkMaker, store: Store
) -> None:
    # Rows spread over two tables, each below a batch, filled the buffer; the writers waited
    # for the flush interval and stored max_buffered_rows per interval (issue 32, C7).
    sink = make_sink(batch_rows=1000, max_buffered_rows=1000, flush_interval_s=3600.0)
    await sink.start()
    actions = [action_row(RUN, f.action(i)) for i in range(700)]
    await asyncio.wait_for(sink.write("signals", signal_rows(0, 700)), 60)
    await asyncio.wait_for(sink.write("actions", actions), 60)  # waits for room, not an hour
    await wait_until(lambda: sink.buffered_rows < 1000, timeout_s=60)
    assert sum(sink.written_rows.values()) >= 400


async def test_lifecycle_errors(
    make_sink: SinkMaker, store: Store, store_settings: StoreSettings
) -> None:
    sink = make_sink()
    with pytest.raises(RuntimeError, match="start"):
        await sink.write("signals", signal_rows(0, 1))
    await sink.start()
    with pytest.raises(ValueError, match="invalid table name"):
        await sink.write("signals; DROP", signal_rows(0, 1))
    await sink.stop()
    with pytest.raises(RuntimeError, match="no longer accepted"):
        await sink.write("signals", signal_rows(0, 1))
    await sink.stop()  # idempotent
    never_started = ClickHouseSink(lambda: store, store_settings)
    await never_started.stop()
    assert not never_started.running


def test_spool_round_trips_python_values(tmp_path: Path) -> None:
    when = datetime(2024, 1, 2, 3, 4, 5, 678_000, tzinfo=UTC)
    row: dict[str, object] = {
        "ts": when,
        "none": None,
        "map": {"a": 1},
        "f": 1.5,
        "inf": math.inf,
        "raw": b"\x00\xff",
        "s": "x",
    }
    path = write_spool(tmp_path, [("t", row)])
    files, bad = read_spool(tmp_path)
    assert bad == [] and files[0].path == path
    assert files[0].rows == [("t", row)]


async def test_an_unreadable_spool_file_is_kept_aside(
    make_sink: SinkMaker, store: Store, store_path: Path
) -> None:
    spool = Path(f"{store_path}.spool")
    spool.mkdir()
    broken = spool / "spool-00000000000000000001-1-abc.jsonl"
    broken.write_text("{not json\n")
    sink = make_sink()
    await sink.start()
    assert not broken.exists()
    assert (spool / (broken.name + ".unreadable")).exists()
    assert sink.buffered_rows == 0


def test_dead_letter_ids_depend_on_table_and_row_only() -> None:
    row = sample_rows(1)[0]
    a = dead_letter_row("gpu_samples", row, "one reason")
    b = dead_letter_row("gpu_samples", dict(reversed(list(row.items()))), "another")
    c = dead_letter_row("events", row, "one reason")
    assert a["id"] == b["id"] != c["id"]


@pytest.mark.parametrize(
    ("message", "store_side"),
    [
        ("Code: 164. DB::Exception: Cannot execute query in readonly mode. (READONLY)", True),
        (
            "Code: 243. DB::Exception: Cannot reserve 1.00 MiB. (NOT_ENOUGH_SPACE)",
            True,
        ),
        (
            "Code: 252. DB::Exception: Too many parts (3001). Merges are processing significantly "
            "slower than inserts. (TOO_MANY_PARTS)",
            True,
        ),
        (
            "Code: 252. DB::Exception: Too many partitions for single INSERT block (more than 100)."
            " (TOO_MANY_PARTS)",
            False,
        ),
        ("cannot insert into gpu_samples: column `gpu_index` into data type `UInt16`: ...", False),
    ],
)
def test_store_side_errors_are_told_from_bad_rows(message: str, store_side: bool) -> None:
    assert is_store_side_error(message) is store_side
