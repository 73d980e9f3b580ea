"""The distributed runner over the broker's SASL_SSL listener (SCRAM-SHA-512, the CA checked):
a Faust worker, `gpufrag publish` and `gpufrag sink` given only that listener and the security
settings carry a replay into the store. The test itself reads the topics through the same
broker's plaintext listener."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer

from models import Envelope, from_json
from streams.app.sinks.topic_sink import sink_topics
from streams.distributed import topics
from tests.app.pipeline_helpers import store_at
from tests.distributed.worker_helpers import (
    kafka_env,
    start_sink,
    start_worker,
    until_reported,
    wait_caught_up,
)
from tests.secure_kafka import SecureKafka

pytestmark = pytest.mark.kafka
NODES = 8


async def last_input_time(bootstrap: str, prefix: str, records: int) -> datetime:
    """The latest event time on the input topics, once all ``records`` are read."""
    names = [t.full_name(prefix) for t in topics.INPUT_BY_KIND.values()]
    consumer = AIOKafkaConsumer(
        *names, bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False
    )
    await consumer.start()
    values: list[bytes] = []
    try:
        async with asyncio.timeout(120):
            while len(values) < records:
                batch = await consumer.getmany(timeout_ms=1000)
                values += [r.value or b"" for rs in batch.values() for r in rs]
    finally:
        await consumer.stop()
    events = [v for v in values if not v.startswith(b'{"kind"')]  # not progress reports
    return max(from_json(Envelope, v).event_time for v in events)


def _publish(kafka: SecureKafka, prefix: str) -> tuple[int, int, str]:
    out = subprocess.run(
        [
            *(sys.executable, "-m", "streams.app", "publish"),
            *("--node-limit", str(NODES), "--prefix", prefix),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=kafka_env(kafka.sasl_ssl, kafka.env()),
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    sent = int(out.stdout.split("published ")[1].split()[0])
    reports = int(out.stdout.split("progress reports ")[1].split()[0])
    return sent, reports, out.stdout + out.stderr


def test_worker_publish_and_sink_reach_the_store_over_sasl_ssl(
    kafka_secure: SecureKafka, topic_prefix: str, tmp_path: Path
) -> None:
    secure, plain = kafka_secure.env(), kafka_secure.plaintext
    dsn = f"chdb://{tmp_path / 'store'}"
    worker_log, sink_log = tmp_path / "worker.log", tmp_path / "sink.log"
    worker = start_worker(kafka_secure.sasl_ssl, topic_prefix, worker_log, extra_env=secure)
    sink = start_sink(kafka_secure.sasl_ssl, topic_prefix, dsn, sink_log, extra_env=secure)
    try:
        sent, reports, said = _publish(kafka_secure, topic_prefix)
        assert sent > 0, said
        last = asyncio.run(last_input_time(plain, topic_prefix, sent + reports))
        until_reported(plain, topic_prefix, last, timeout_s=600)
        wait_caught_up(plain, f"{topic_prefix}gpufrag-sink", sink_topics(topic_prefix))
    finally:
        for proc in (sink, worker):
            proc.terminate()
        for proc in (sink, worker):
            proc.wait(120)
    logs = worker_log.read_text() + sink_log.read_text() + said
    assert sink.returncode == 0, sink_log.read_text()[-3000:]
    assert kafka_secure.password not in logs
    assert f"from {kafka_secure.sasl_ssl} into {dsn}" in sink_log.read_text()
    with store_at(dsn) as st:
        count = {
            table: int(str(st.query(f"SELECT count() FROM {table} FINAL").rows[0][0]))
            for table in ("events", "node_profiles", "cluster_frag")
        }
        (source,) = st.query("SELECT source FROM runs FINAL").rows[0]
    assert count["events"] == sent, count  # every published event, through the sink
    assert count["node_profiles"] >= NODES and count["cluster_frag"] > 0, count  # the worker's
    assert str(source) == f"distributed:kafka:{kafka_secure.sasl_ssl}/{topic_prefix}"
