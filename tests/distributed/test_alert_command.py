"""`gpufrag alert` end to end: signals on the real broker's signals topic reach a real
Alertmanager and a webhook, an unreadable record lands on the dead-letter topic with why, and
the group's offsets are committed once the sinks have the alerts."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from connectors.kafka.producer import acked_producer
from models import KafkaSettings, to_json
from streams.app.lifecycle.bus import Bus
from streams.distributed import topics
from tests.connectors.alerts.alerting import storm, until
from tests.connectors.alerts.alertmanager_proc import Alertmanager
from tests.connectors.alerts.receiver import Receiver
from tests.distributed.worker_helpers import collect, kafka_env

pytestmark = [pytest.mark.kafka, pytest.mark.alertmanager]


async def _committed_all(bootstrap: str, prefix: str) -> bool:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, group_id=f"{prefix}gpufrag-alert", enable_auto_commit=False
    )
    await consumer.start()
    try:
        tps = [
            TopicPartition(topics.SIGNALS.full_name(prefix), p)
            for p in range(topics.SIGNALS.partitions)
        ]
        ends = await consumer.end_offsets(tps)
        for tp in tps:
            if ((await consumer.committed(tp)) or 0) < ends[tp]:
                return False
        return True
    finally:
        await consumer.stop()


async def test_signals_on_the_topic_become_alerts_and_bad_records_dead_letters(
    kafka_bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    am = Alertmanager(tmp_path)
    await am.start()
    hook = Receiver()
    await hook.start()
    kafka = KafkaSettings(bootstrap=kafka_bootstrap)
    await Bus(kafka, topic_prefix).ensure_topics()
    producer = acked_producer(kafka, client_id="test-alert")
    await producer.start()
    signals_topic = topics.SIGNALS.full_name(topic_prefix)
    try:
        for value in (to_json(storm("n1")), to_json(storm("n2")), b"{broken"):
            await producer.send_and_wait(signals_topic, key=b"k", value=value)
        env = {
            **kafka_env(kafka_bootstrap),
            "GPUFRAG_ALERTS__ALERTMANAGER_URL": am.url,
            "GPUFRAG_ALERTS__WEBHOOK_URL": hook.url,
            "GPUFRAG_ALERTS__CLUSTER": "kafka-test",
            "GPUFRAG_ALERTS__RESEND_INTERVAL_S": "1",
        }
        log = tmp_path / "alert.log"
        proc = subprocess.Popen(
            [sys.executable, "-m", "streams.app", "alert", "--prefix", topic_prefix],
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
            env=env,
        )
        try:

            async def listed() -> bool:
                nodes = {a["labels"].get("node") for a in await am.alerts()}  # type: ignore[union-attr]
                return nodes == {"n1", "n2"}

            await until(listed, within_s=120)
            await producer.send_and_wait(
                signals_topic, key=b"k", value=to_json(storm("n1", resolved_after_s=10))
            )

            async def n1_ended() -> bool:
                nodes = {a["labels"].get("node") for a in await am.alerts()}  # type: ignore[union-attr]
                return nodes == {"n2"}

            await until(n1_ended, within_s=120)
            await until(lambda: len(hook.bodies) >= 2, within_s=120)

            async def committed() -> bool:
                return await _committed_all(kafka_bootstrap, topic_prefix)

            await until(committed, within_s=120)
        finally:
            proc.send_signal(signal.SIGTERM)
            rc = await asyncio.to_thread(proc.wait, 60)
        out = log.read_text()
        assert rc == 0, out[-3000:]
        assert "4 signal records" in out and "1 unreadable" in out, out[-3000:]
        sent = "3 alerts to alertmanager: 3 sent, 0 dead-lettered; to webhook: 3 sent, 0 dead"
        assert sent in out, out[-3000:]
        got = [a for b in hook.bodies for a in b["alerts"]]
        assert sorted((a["labels"]["node"], a["status"]) for a in got) == [
            ("n1", "firing"),
            ("n1", "resolved"),
            ("n2", "firing"),
        ]
        assert {a["labels"]["cluster"] for a in got} == {"kafka-test"}
        letters = await collect(
            kafka_bootstrap, topics.DEAD_LETTER.full_name(topic_prefix), until=1, timeout_s=60
        )
        body = orjson.loads(letters[0])
        assert (body["source"], body["reason"], body["raw"]) == (
            f"kafka/{signals_topic}",
            "unreadable_signal",
            "{broken",
        )
    finally:
        await producer.stop()
        await hook.stop()
        await am.stop()
