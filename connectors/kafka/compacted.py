"""Reading compacted topics whole, outside any consumer group: a worker group's state as the
broker keeps it (changelogs, the state schema version), looked at before its workers start."""

from __future__ import annotations

from collections.abc import Iterable

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from connectors.kafka.producer import acked_producer
from connectors.kafka.security import client_kwargs
from models.kafka_settings import KafkaSettings

__all__ = ["ever_written", "latest_values", "put_value"]


def _consumer(kafka: KafkaSettings) -> AIOKafkaConsumer:
    # no group: nothing is committed, and no group's members are disturbed
    return AIOKafkaConsumer(
        **client_kwargs(kafka),
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        client_id="gpufrag-state",
    )


async def _partitions(kafka: KafkaSettings, topics: Iterable[str]) -> list[TopicPartition]:
    """The topics' partitions as the broker has them (a consumer's own metadata knows only the
    topics it was given)."""
    admin = AIOKafkaAdminClient(**client_kwargs(kafka), client_id="gpufrag-state")
    await admin.start()
    try:
        described = await admin.describe_topics(list(topics))
    finally:
        await admin.close()
    return [
        TopicPartition(d["topic"], p["partition"])
        for d in described
        for p in sorted(d["partitions"], key=lambda p: int(p["partition"]))
    ]


async def ever_written(kafka: KafkaSettings, topics: Iterable[str]) -> bool:
    """Whether any of ``topics`` ever took a record (an end offset past 0): compaction may
    have removed them since, but the topics are not new."""
    tps = await _partitions(kafka, topics)
    if not tps:
        return False
    consumer = _consumer(kafka)
    await consumer.start()
    try:
        ends = await consumer.end_offsets(tps)
        return any(end > 0 for end in ends.values())
    finally:
        await consumer.stop()


async def latest_values(
    kafka: KafkaSettings, topic: str, *, keep_values: bool = True
) -> dict[bytes, bytes | None]:
    """Every key's latest value, read from the start of each partition to its end as of now;
    a deleted key (its latest record a tombstone) is left out. ``keep_values=False`` keeps the
    keys only (values None): a changelog's values can be large."""
    tps = await _partitions(kafka, [topic])
    if not tps:
        return {}
    consumer = _consumer(kafka)
    await consumer.start()
    try:
        consumer.assign(tps)
        ends = await consumer.end_offsets(tps)
        starts = await consumer.beginning_offsets(tps)
        for tp in tps:  # an explicit seek: seek_to_beginning raced the assignment's own reset
            consumer.seek(tp, starts[tp])
        out: dict[bytes, bytes | None] = {}
        left = {tp for tp in tps if ends[tp] > starts[tp]}
        while left:
            batches = await consumer.getmany(*left, timeout_ms=1000)
            for tp, records in batches.items():
                for r in records:
                    if r.offset >= ends[tp] or r.key is None:
                        continue
                    if r.value is None:
                        out.pop(r.key, None)
                    else:
                        out[r.key] = r.value if keep_values else None
            left = {tp for tp in left if await consumer.position(tp) < ends[tp]}
        return out
    finally:
        await consumer.stop()


async def put_value(kafka: KafkaSettings, topic: str, key: bytes, value: bytes) -> None:
    """One record, acknowledged by every in-sync replica before this returns."""
    producer = acked_producer(kafka, client_id="gpufrag-state")
    await producer.start()
    try:
        await producer.send_and_wait(topic, value=value, key=key)
    finally:
        await producer.stop()
