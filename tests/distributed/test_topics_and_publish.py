"""Topics and the publisher against a real Apache Kafka broker."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections import defaultdict

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from connectors.kafka.admin import TopicMismatch, TopicRequest, ensure_topics
from models import Envelope, KafkaSettings, from_json
from models.progress import SourceProgress
from streams.app.lifecycle.bus import Bus
from streams.distributed import topics

pytestmark = pytest.mark.kafka


async def test_topics_are_created_once_with_their_settings(
    kafka_bootstrap: str, topic_prefix: str
) -> None:
    kafka = KafkaSettings(bootstrap=kafka_bootstrap)
    wanted = Bus(kafka, topic_prefix).topic_requests()
    created = await ensure_topics(kafka, wanted)
    assert sorted(created) == sorted(t.name for t in wanted)
    assert await ensure_topics(kafka, wanted) == []
    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    await admin.start()
    try:
        described = {d["topic"]: d for d in await admin.describe_topics([t.name for t in wanted])}
        for t in topics.ALL:
            assert len(described[t.full_name(topic_prefix)]["partitions"]) == t.partitions
        res = await admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, topics.NODES.full_name(topic_prefix))]
        )
        configs = {c[0]: c[1] for c in res[0].resources[0][4]}
        assert configs["cleanup.policy"] == "compact"
    finally:
        await admin.close()
    bigger = [TopicRequest(wanted[0].name, wanted[0].partitions + 4, {})]
    with pytest.raises(TopicMismatch, match="partitions"):
        await ensure_topics(kafka, bigger)
    # the cluster view's topics are read together by one worker: more partitions is wrong too
    # (its reports, written in instant order, are kept on one partition as well)
    assert {t.name for t in wanted if t.exact} == {
        topics.CAPACITY_DELTAS.full_name(topic_prefix),
        topics.QUEUES.full_name(topic_prefix),
        topics.CLUSTER_REPORTS.full_name(topic_prefix),
    }
    wider = [TopicRequest(wanted[0].name, 1, {}, exact=True)]
    with pytest.raises(TopicMismatch, match="12 partitions, 1 declared"):
        await ensure_topics(kafka, wider)


async def _consume_all(
    bootstrap: str, names: list[str], expected: int
) -> list[tuple[str, int, bytes, bytes]]:
    consumer = AIOKafkaConsumer(
        *names, bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False
    )
    await consumer.start()
    got: list[tuple[str, int, bytes, bytes]] = []
    try:
        async with asyncio.timeout(60):
            while len(got) < expected:
                batch = await consumer.getmany(timeout_ms=1000)
                for tp, records in batch.items():
                    got += [(tp.topic, tp.partition, r.key or b"", r.value or b"") for r in records]
    finally:
        await consumer.stop()
    return got


def test_publish_puts_a_replay_on_keyed_input_topics(
    kafka_bootstrap: str, topic_prefix: str
) -> None:
    env = {**os.environ, "GPUFRAG_KAFKA__BOOTSTRAP": kafka_bootstrap}
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "streams.app",
            "publish",
            "--node-limit",
            "20",
            "--prefix",
            topic_prefix,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    sent = int(out.stdout.split("published ")[1].split()[0])
    reports = int(out.stdout.split("progress reports ")[1].split()[0])
    names = [t.full_name(topic_prefix) for t in topics.INPUT_BY_KIND.values()]
    got = asyncio.run(_consume_all(kafka_bootstrap, names, sent + reports))
    assert len(got) == sent + reports
    partitions_of_key: defaultdict[tuple[str, bytes], set[int]] = defaultdict(set)
    last_time = max(
        from_json(Envelope, v).event_time for _, _, _, v in got if not v.startswith(b'{"kind"')
    )
    # progress: every partition of every input topic hears it, no event breaks its promise,
    # and the last report of each partition covers the whole replay
    promised: dict[tuple[str, int], object] = {}
    for topic, partition, _, value in got:
        if value.startswith(b'{"kind"'):
            progress = SourceProgress.model_validate_json(value)
            promised[(topic, partition)] = progress.upto
            continue
        at = from_json(Envelope, value).event_time
        upto = promised.get((topic, partition))
        assert upto is None or at > upto, f"event at {at} after progress up to {upto}"
    assert len(promised) == sum(t.partitions for t in topics.INPUT_BY_KIND.values())
    assert set(promised.values()) == {last_time}
    for topic, partition, key, value in got:
        if value.startswith(b'{"kind"'):
            continue
        envelope = from_json(Envelope, value)
        assert envelope.key.encode() == key
        assert topics.INPUT_BY_KIND[envelope.kind].full_name(topic_prefix) == topic
        partitions_of_key[(topic, key)].add(partition)
    # a key always lands on one partition: that is where its state will live
    assert all(len(p) == 1 for p in partitions_of_key.values())
    node_keys = {k for (t, k) in partitions_of_key if t == topics.NODES.full_name(topic_prefix)}
    assert len(node_keys) == 20
