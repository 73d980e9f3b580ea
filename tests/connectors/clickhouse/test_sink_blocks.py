"""The sink's buffer of value tuples: blocks of one insert, rows of other columns apart, rows
written during an insert kept for the next one, and tuples spooled and re-sent as rows."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import orjson

from connectors.clickhouse import Store
from connectors.clickhouse.row_values import EVENT_COLUMNS, Values, event_values
from connectors.clickhouse.rows import Row, gpu_sample_row
from connectors.clickhouse.sink_buffer import TableBuffer, blocks_of
from connectors.clickhouse.spool import read_spool
from tests.connectors.clickhouse import factories as f
from tests.connectors.clickhouse.helpers import SinkMaker, count, wait_until

RUN = "run-1"
INGESTED = datetime.now(UTC).replace(microsecond=0)


def events(start: int, stop: int) -> list[Values]:
    return [
        event_values(RUN, f.gpu_sample_env(i), ingested_at=INGESTED) for i in range(start, stop)
    ]


def test_a_buffer_fills_its_open_tail_then_opens_blocks_of_one_insert() -> None:
    buffer = TableBuffer()
    names = ("a",)
    buffer.add(names, [(1,), (2,), (3,)], cap=4, now=0.0)
    buffer.add(names, [(n,) for n in range(4, 11)], cap=4, now=1.0)
    assert [[r[0] for r in b.rows] for b in buffer.blocks] == [
        [1, 2, 3, 4],
        [5, 6, 7, 8],
        [9, 10],
    ]
    assert [b.arrived for b in buffer.blocks] == [0.0, 1.0, 1.0]  # the oldest row's time
    head = buffer.take_head()
    assert head is not None and head.sealed
    buffer.add(("b",), [(0,)], cap=4, now=2.0)  # other columns: a block of their own
    buffer.add(names, [(11,)], cap=4, now=2.0)
    assert [len(b.rows) for b in buffer.blocks] == [4, 4, 2, 1, 1]
    buffer.drop_head(head)
    assert (buffer.count, buffer.appended, buffer.done) == (8, 12, 4)


def test_dict_rows_are_cut_where_their_keys_change() -> None:
    rows: list[Row] = [{"a": 1, "b": 2}, {"a": 3, "b": 4}, {"b": 5, "a": 6}, {"a": 7}]
    assert list(blocks_of(rows)) == [
        (("a", "b"), [(1, 2), (3, 4)]),
        (("b", "a"), [(5, 6)]),
        (("a",), [(7,)]),
    ]


async def test_tuples_and_dicts_of_one_table_are_all_stored_once(
    make_sink: SinkMaker, store: Store
) -> None:
    sink = make_sink(batch_rows=10)
    await sink.start()
    await sink.write_rows("events", EVENT_COLUMNS, events(0, 25))
    sample = gpu_sample_row(RUN, f.gpu_sample_env(1))
    shuffled = dict(reversed(list(sample.items())))  # same columns, another order
    await sink.write("gpu_samples", [sample, {**shuffled, "event_id": "other"}])
    await sink.flush()
    assert count(store, "events") == 25 and count(store, "gpu_samples") == 2
    assert sink.insert_errors == {} and sink.dead_lettered_rows == {}


async def test_rows_written_during_an_insert_wait_for_the_next_one(
    make_sink: SinkMaker, store: Store
) -> None:
    sink = make_sink()
    await sink.start()
    store.command("DETACH TABLE events")
    await sink.write_rows("events", EVENT_COLUMNS, events(0, 5))
    await wait_until(lambda: sink.retries >= 2)  # the first block is being retried
    await sink.write_rows("events", EVENT_COLUMNS, events(5, 12))
    assert sink.buffered_for("events") == 12
    store.command("ATTACH TABLE events")
    await asyncio.wait_for(sink.flush(), 5)
    assert count(store, "events") == 12  # every row once: none joined the block in flight
    assert count(store, "events", final=True) == 12


async def test_a_bad_tuple_is_dead_lettered_as_its_row(make_sink: SinkMaker, store: Store) -> None:
    sink = make_sink()
    await sink.start()
    good = events(0, 6)
    bad = (*good[2][:6], 70_000, *good[2][7:])  # schema_version is a UInt16
    await sink.write_rows("events", EVENT_COLUMNS, [*good, bad])
    await sink.flush()
    assert count(store, "events") == 6 and sink.dead_lettered_rows == {"events": 1}
    (letter,) = store.query("SELECT reason, row FROM dead_letter").rows
    assert str(letter[0]).startswith("cannot insert into events: column `schema_version`")
    assert orjson.loads(str(letter[1]))["schema_version"] == 70_000


async def test_tuples_are_spooled_as_rows_and_sent_again_after_a_restart(
    make_sink: SinkMaker, store: Store
) -> None:
    first = make_sink()
    await first.start()
    store.command("DETACH TABLE events")
    await first.write_rows("events", EVENT_COLUMNS, events(0, 8))
    await first.stop(timeout_s=0.2)
    spooled = first.spooled_file
    assert spooled is not None
    (file,), _ = read_spool(spooled.parent)
    assert [table for table, _ in file.rows] == ["events"] * 8
    assert [sorted(row) for _, row in file.rows] == [sorted(EVENT_COLUMNS)] * 8

    store.command("ATTACH TABLE events")
    second = make_sink()
    await second.start()
    await asyncio.wait_for(second.flush(), 5)
    assert count(store, "events") == 8 and not spooled.exists()
    await second.stop()
