"""A Faust worker of the distributed runner against the real broker: signals and dead letters."""

from __future__ import annotations

import asyncio
import urllib.request
from pathlib import Path

import orjson
import pytest
from aiokafka import AIOKafkaProducer
from prometheus_client.parser import text_string_to_metric_families

from models import Signal, from_json
from streams.distributed import topics
from tests.app.pipeline_helpers import store_at
from tests.app.reference_replay import NODE_LIMIT, operator_signals
from tests.distributed.worker_helpers import (
    collect,
    publish,
    signal_key,
    start_sink,
    start_worker,
    wait_caught_up,
)
from tests.ports import free_port

pytestmark = pytest.mark.kafka
MALFORMED = 10_000


def _malformed(i: int) -> bytes:
    kinds = [
        b"\xff\xfe not utf-8 \x00",
        b"{not json",
        orjson.dumps({"id": "x", "key": "k"}),  # JSON, not an envelope
        orjson.dumps(
            {
                "id": "x",
                "key": "k",
                "event_time": "2024-01-01T00:00:00Z",
                "source": "s",
                "schema_version": 99,
                "payload": {"kind": "pod", "change": "upsert"},
            }
        ),
    ]
    return kinds[i % len(kinds)]


async def _send_malformed(bootstrap: str, prefix: str) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=20)
    await producer.start()
    try:
        targets = [topics.PODS.full_name(prefix), topics.NODES.full_name(prefix)]
        for i in range(MALFORMED):
            await producer.send(targets[i % 2], key=f"junk-{i}".encode(), value=_malformed(i))
        await producer.flush()
    finally:
        await producer.stop()


def test_worker_emits_the_embedded_signals_and_dead_letters_malformed_input(
    kafka_bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    port = free_port()
    proc = start_worker(kafka_bootstrap, topic_prefix, tmp_path / "worker.log", metrics_port=port)
    dsn = f"chdb://{tmp_path / 'store'}"
    sink = start_sink(kafka_bootstrap, topic_prefix, dsn, tmp_path / "sink.log")
    try:
        asyncio.run(_send_malformed(kafka_bootstrap, topic_prefix))
        publish(kafka_bootstrap, topic_prefix, "--node-limit", str(NODE_LIMIT))

        # The cluster view restores event-time order, so every signal (unplaceable pods and
        # cluster-wide ones included) matches the embedded runner's, evidence and times too.
        ours = {signal_key(s.model_dump(mode="json")) for s in operator_signals(flush=False)}
        assert {k[1] for k in ours} >= {
            "stranded_gpus",
            "fragmentation",
            "unplaceable_pending",
        }
        raw = asyncio.run(
            collect(
                kafka_bootstrap,
                topics.SIGNALS.full_name(topic_prefix),
                until=len(ours),
                timeout_s=180,
                settle_s=3.0,
            )
        )
        theirs = {signal_key(from_json(Signal, r).model_dump(mode="json")) for r in raw}
        assert theirs == ours
        dead = asyncio.run(
            collect(
                kafka_bootstrap,
                topics.DEAD_LETTER.full_name(topic_prefix),
                until=MALFORMED,
                timeout_s=180,
            )
        )
        assert len(dead) == MALFORMED
        records = [orjson.loads(d) for d in dead]
        assert all(
            r["reason"] and r["offset"] >= 0 and r["topic"].startswith(topic_prefix)
            for r in records
        )
        assert any("schema_version 99 is newer" in r["reason"] for r in records)
        assert proc.poll() is None  # the worker is still up
        # and says so on its metrics endpoint
        _assert_worker_metrics(port, signals=len(ours), topic_prefix=topic_prefix)
        # and `gpufrag sink` keeps every dead letter in the store, with its reason and origin
        wait_caught_up(
            kafka_bootstrap,
            f"{topic_prefix}gpufrag-sink",
            [t.full_name(topic_prefix) for t in (topics.SIGNALS, topics.DEAD_LETTER)],
            timeout_s=120,
        )
    finally:
        proc.terminate()
        sink.terminate()
        proc.wait(60)
        sink.wait(60)
    with store_at(dsn) as st:
        res = st.query("SELECT target, reason, run_id FROM dead_letter FINAL")
    assert len(res.rows) == MALFORMED
    assert {str(r[2]) for r in res.rows} == {"live"}  # the sink's run (its --run-id)
    assert {str(r[0]) for r in res.rows} == {f"topic:{topics.DEAD_LETTER.full_name(topic_prefix)}"}
    assert all(topic_prefix in str(r[1]) for r in res.rows)  # names the input it came from


def _assert_worker_metrics(port: int, *, signals: int, topic_prefix: str) -> None:
    """The worker's /metrics counts the dead letters by reason, and what it released."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    figures = {
        s.name: s.value for family in text_string_to_metric_families(text) for s in family.samples
    }
    assert figures["gpufrag_worker_dead_letters_total"] == MALFORMED
    by_reason = [
        s
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "gpufrag_worker_dead_letters_by_reason_total"
    ]
    assert sum(s.value for s in by_reason) == MALFORMED
    assert {s.labels["reason"] for s in by_reason} == {"undecodable"}
    assert all(s.labels["topic"].startswith(topic_prefix) for s in by_reason)
    assert figures["gpufrag_worker_released_total"] > 0
    assert figures["gpufrag_worker_signals_total"] >= signals
