"""`gpufrag sink`'s delivery against a real broker and the chDB engine: a sink that dies
after storing a batch but before committing its offsets, and a second sink joining the group
of a running one. Either way every record becomes exactly one row per key; records read
twice leave exact copies that the table's key merges (shown by merging them).

Both sinks run in this process on one chDB store: chDB admits one process per store, and
two sinks in separate processes need a ClickHouse server, which cannot run here.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from connectors.clickhouse.sink import ClickHouseSink
from connectors.clickhouse.store import Store, open_store
from models import KafkaSettings, StoreSettings, to_json
from streams.app.lifecycle.bus import Bus
from streams.app.lifecycle.history import open_history
from streams.app.sinks.topic_sink import TopicSink, sink_topics, topic_sink
from streams.distributed import topics
from tests.connectors.clickhouse.factories import gpu_sample_env, signal
from tests.distributed.worker_helpers import group_lag

pytestmark = pytest.mark.kafka
GROUP = "sinks"
SAMPLES = 400
SIGNALS = 300


class Killed(Exception):
    """The sink's process dying."""


class SmallBatches:
    """The real consumer, 50 records a batch, so a run of the sink takes many batches."""

    def __init__(self, consumer: AIOKafkaConsumer) -> None:
        self.consumer = consumer
        self.commits = 0

    async def getmany(self, *, timeout_ms: int, max_records: int) -> Any:
        return await self.consumer.getmany(timeout_ms=timeout_ms, max_records=min(50, max_records))

    async def commit(self) -> None:
        self.commits += 1
        await self.consumer.commit()


class DiesAtCommit(SmallBatches):
    """Until the sink's ``at``-th commit: the batch's rows are in the store by then, its
    offsets never reach the broker."""

    def __init__(self, consumer: AIOKafkaConsumer, *, at: int) -> None:
        super().__init__(consumer)
        self.at = at

    async def commit(self) -> None:
        if self.commits + 1 == self.at:
            self.commits += 1
            raise Killed
        await super().commit()


async def produce(bootstrap: str, prefix: str, lo: int, hi: int) -> None:
    """GPU samples ``lo..hi`` (input events, 16 node keys) and signals ``lo..hi`` (below
    SIGNALS), spread over the topics' partitions."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        for i in range(lo, hi):
            env = gpu_sample_env(i, node=f"gpu-node-{i % 16}")
            await producer.send(
                topics.GPU_SAMPLES.full_name(prefix), key=env.key.encode(), value=to_json(env)
            )
            if i < SIGNALS:
                sig = signal(i)
                await producer.send(
                    topics.SIGNALS.full_name(prefix),
                    key=sig.fingerprint.encode(),
                    value=to_json(sig),
                )
        await producer.flush()
    finally:
        await producer.stop()


@asynccontextmanager
async def a_sink(bootstrap: str, prefix: str, settings: StoreSettings) -> AsyncIterator[TopicSink]:
    consumer = AIOKafkaConsumer(
        *sink_topics(prefix),
        bootstrap_servers=bootstrap,
        group_id=f"{prefix}{GROUP}",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    rows = ClickHouseSink(lambda: open_store(settings), settings)
    await rows.start()
    await consumer.start()
    try:
        yield topic_sink(prefix, consumer=consumer, sink=rows, run_id="live")
    finally:
        await consumer.stop()  # auto-commit is off: nothing is committed here
        await rows.stop()


async def caught_up(bootstrap: str, prefix: str, *, timeout_s: float = 180) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        got = await group_lag(bootstrap, f"{prefix}{GROUP}", sink_topics(prefix))
        if got[0] == 0:
            return
        assert asyncio.get_running_loop().time() < deadline, got
        await asyncio.sleep(1.0)


def keys(store: Store, sql: str) -> list[tuple[object, ...]]:
    return sorted(tuple(r) for r in store.query(sql).rows)


def count(store: Store, table: str, *, final: bool) -> int:
    return int(
        str(store.query(f"SELECT count() FROM {table}{' FINAL' if final else ''}").rows[0][0])
    )


def stored(sink: TopicSink) -> int:
    """Records this sink turned into rows (signals and input events)."""
    return sink.counts["signals"] + (sink.history.counts["events"] if sink.history else 0)


def check_exactly_once(store: Store) -> None:
    """Every record is one row by key, and merging the table's keys leaves one row each."""
    want_events = sorted(gpu_sample_env(i, node=f"gpu-node-{i % 16}").id for i in range(SAMPLES))
    assert [k[0] for k in keys(store, "SELECT id FROM events FINAL")] == want_events
    assert count(store, "gpu_samples", final=True) == SAMPLES
    want_signals = sorted((signal(i).fingerprint, signal(i).opened_at) for i in range(SIGNALS))
    got = keys(store, "SELECT fingerprint, opened_at FROM signals FINAL")
    assert [(str(f), o) for f, o in got] == want_signals
    for table in ("events", "gpu_samples", "signals"):
        store.command(f"OPTIMIZE TABLE {table} FINAL")
    assert count(store, "events", final=False) == SAMPLES
    assert count(store, "gpu_samples", final=False) == SAMPLES
    assert count(store, "signals", final=False) == SIGNALS


async def test_a_sink_killed_between_storing_and_committing_loses_and_doubles_nothing(
    kafka_bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    settings = StoreSettings(dsn=f"chdb://{tmp_path / 'store'}", flush_interval_s=0.05)
    await Bus(KafkaSettings(bootstrap=kafka_bootstrap), topic_prefix).ensure_topics()
    await produce(kafka_bootstrap, topic_prefix, 0, SAMPLES)
    # the measure of "caught up" sees every record before any sink ran
    lag, _ = await group_lag(kafka_bootstrap, f"{topic_prefix}{GROUP}", sink_topics(topic_prefix))
    assert lag == SAMPLES + SIGNALS
    store = await asyncio.to_thread(open_history, settings)
    try:
        async with a_sink(kafka_bootstrap, topic_prefix, settings) as first:
            dying = DiesAtCommit(first.consumer, at=4)
            first.consumer = dying
            with pytest.raises(Killed):
                await first.run(asyncio.Event())
            assert dying.commits == 4  # three batches committed, the fourth stored only
        async with a_sink(kafka_bootstrap, topic_prefix, settings) as second:
            stop = asyncio.Event()
            running = asyncio.create_task(second.run(stop))
            await caught_up(kafka_bootstrap, topic_prefix)
            stop.set()
            await running
        # the batch stored but not committed was read and stored again by the second sink
        assert stored(first) + stored(second) > SAMPLES + SIGNALS
        await asyncio.to_thread(check_exactly_once, store)
    finally:
        await asyncio.to_thread(store.close)


async def test_two_sinks_in_one_group_split_the_records_and_store_each_once(
    kafka_bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    settings = StoreSettings(dsn=f"chdb://{tmp_path / 'store'}", flush_interval_s=0.05)
    await Bus(KafkaSettings(bootstrap=kafka_bootstrap), topic_prefix).ensure_topics()
    await produce(kafka_bootstrap, topic_prefix, 0, SAMPLES // 2)
    store = await asyncio.to_thread(open_history, settings)
    stop = asyncio.Event()
    try:
        async with a_sink(kafka_bootstrap, topic_prefix, settings) as a:
            a.consumer = SmallBatches(a.consumer)
            running_a = asyncio.create_task(a.run(stop))
            deadline = asyncio.get_running_loop().time() + 120
            while not a.counts["signals"]:
                assert asyncio.get_running_loop().time() < deadline
                await asyncio.sleep(0.2)
            # B's consumer joins the group while A runs: the group rebalances, and the second
            # half of the records is produced after it
            async with a_sink(kafka_bootstrap, topic_prefix, settings) as b:
                running_b = asyncio.create_task(b.run(stop))
                await produce(kafka_bootstrap, topic_prefix, SAMPLES // 2, SAMPLES)
                await caught_up(kafka_bootstrap, topic_prefix)
                stop.set()
                await asyncio.gather(running_a, running_b)
        assert stored(a) > 0 and stored(b) > 0  # both took a share
        await asyncio.to_thread(check_exactly_once, store)
    finally:
        stop.set()
        await asyncio.to_thread(store.close)
