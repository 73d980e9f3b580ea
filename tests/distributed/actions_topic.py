"""Requests onto the actions topic, `gpufrag actuate` started on it, and its outcomes read back
from it: the tests of the actuator against the real broker and kube-apiserver."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import orjson
from aiokafka import AIOKafkaConsumer, TopicPartition

from connectors.kafka.producer import acked_producer
from models import KafkaSettings
from streams.app.lifecycle.bus import Bus
from streams.distributed import topics
from tests.distributed.worker_helpers import collect, kafka_env

WITHIN_S = 120.0


async def publish_actions(bootstrap: str, prefix: str, values: list[tuple[str, bytes]]) -> None:
    kafka = KafkaSettings(bootstrap=bootstrap)
    await Bus(kafka, prefix).ensure_topics()
    producer = acked_producer(kafka, client_id="test-actuate")
    await producer.start()
    try:
        for key, value in values:
            await producer.send_and_wait(
                topics.ACTIONS.full_name(prefix), key=key.encode(), value=value
            )
    finally:
        await producer.stop()


async def outcomes_of(bootstrap: str, prefix: str, ids: set[str]) -> dict[str, dict[str, object]]:
    """The outcome records of ``ids`` on the actions topic, once all are there."""

    def records(got: list[bytes]) -> dict[str, dict[str, object]]:
        out = {}
        for raw in got:
            body = orjson.loads(raw)
            if isinstance(body, dict) and "outcome" in body and body["id"] in ids:
                out[body["id"]] = body
        return out

    got = await collect(
        bootstrap,
        topics.ACTIONS.full_name(prefix),
        done=lambda got: records(got).keys() == ids,
        timeout_s=WITHIN_S,
    )
    return records(got)


def start_actuate(
    bootstrap: str,
    prefix: str,
    kubeconfig: Path,
    *,
    mode: str,
    namespace: str,
    metrics_port: int,
    settings: dict[str, str] | None = None,
    identity: str = "actuate-test",
    duration_s: float = WITHIN_S * 4,
) -> tuple[subprocess.Popen[bytes], Path]:
    """`gpufrag actuate` on ``prefix``'s actions topic, acting on the cluster of
    ``kubeconfig`` with its Lease in ``namespace`` as ``identity``; ``settings``: more
    GPUFRAG_* variables. The process and its log."""
    log = kubeconfig.parent / f"actuate-{identity}.log"
    env = {
        **kafka_env(bootstrap),
        "GPUFRAG_GUARDRAILS__MODE": mode,
        "GPUFRAG_KUBE__KUBECONFIG": str(kubeconfig),
        "GPUFRAG_ACTUATOR__NAMESPACE": namespace,
        "GPUFRAG_ACTUATOR__IDENTITY": identity,
        **(settings or {}),
    }
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "streams.app", "actuate", "--prefix", prefix),
            *("--duration-s", str(duration_s), "--loglevel", "info"),
            *("--metrics-port", str(metrics_port)),
        ],
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        env=env,
    )
    return proc, log


async def until_committed(bootstrap: str, prefix: str) -> None:
    """Wait until the actuator's group committed every record of the actions topic (its own
    outcomes included: it reads them too, and skips them)."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, group_id=f"{prefix}gpufrag-actuator", enable_auto_commit=False
    )
    await consumer.start()
    try:
        name = topics.ACTIONS.full_name(prefix)
        tps = [TopicPartition(name, p) for p in range(topics.ACTIONS.partitions)]
        deadline = asyncio.get_running_loop().time() + WITHIN_S
        while True:
            ends = await consumer.end_offsets(tps)
            behind = {tp: ends[tp] - ((await consumer.committed(tp)) or 0) for tp in tps}
            if not any(n > 0 for n in behind.values()):
                return
            assert asyncio.get_running_loop().time() < deadline, behind
            await asyncio.sleep(0.2)
    finally:
        await consumer.stop()


async def every_record(bootstrap: str, topic: str) -> list[bytes]:
    """Every record on the actions topic ``topic`` now, in partition order."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap)
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(topics.ACTIONS.partitions)]
        total = sum((await consumer.end_offsets(tps)).values())
    finally:
        await consumer.stop()
    return await collect(bootstrap, topic, until=total, timeout_s=WITHIN_S)
