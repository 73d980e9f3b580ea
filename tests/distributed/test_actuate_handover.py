"""Two `gpufrag actuate` processes in enforce mode, one Lease, on the real broker and the real
kube-apiserver: the holder carries out two evictions and is frozen (SIGSTOP) before its commit
(emulated: the group's offsets are set back to the start, as a holder that lost the Lease
mid-batch leaves them; one outcome lands a batch's worth of records past its request); the
other takes the Lease over and the partitions with it, reads the
two requests again, finds their outcomes ahead on the topic, and carries out neither again,
only the request published after the handover. Every action id has exactly one outcome record
on the topic, by the actuator that carried it out."""

from __future__ import annotations

import asyncio
import signal
import time
from collections import Counter
from pathlib import Path

import orjson
import pytest
from aiokafka import AIOKafkaConsumer
from kubernetes_asyncio.client import ApiClient

from models import EvictPod, to_json
from streams.distributed import topics
from tests.connectors.kube.actuator_helpers import ENFORCE, lease_holder, pod_or_none, running_pod
from tests.distributed.actions_topic import (
    WITHIN_S,
    every_record,
    outcomes_of,
    publish_actions,
    start_actuate,
    until_committed,
)
from tests.ports import free_port

pytestmark = [pytest.mark.kafka, pytest.mark.apiserver]

LEASE = {
    "GPUFRAG_ACTUATOR__LEASE_DURATION_S": "6",
    "GPUFRAG_ACTUATOR__RENEW_DEADLINE_S": "4",
    "GPUFRAG_ACTUATOR__RENEW_INTERVAL_S": "1",
}
"""Short, so the frozen holder's Lease runs out within seconds."""
FILLER = 150
"""Records that are not requests (the sink's business), between r1 and its outcome."""


async def _until_holder(client: ApiClient, namespace: str, identity: str) -> None:
    deadline = time.monotonic() + WITHIN_S
    while (held := await _holder_or_none(client, namespace)) != identity:
        assert time.monotonic() < deadline, f"the Lease is {held!r}, never {identity!r}"
        await asyncio.sleep(0.2)


async def _holder_or_none(client: ApiClient, namespace: str) -> str | None:
    """None until the first contender has created the Lease."""
    try:
        return await lease_holder(client, namespace, "gpufrag-actuator")
    except Exception:  # not created yet
        return None


async def _set_back_to_the_start(bootstrap: str, group: str, topic: str) -> None:
    """Commit offset 0 on every partition, as the group's only member once the frozen one's
    session has expired (the join waits for that)."""
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False
    )
    await consumer.start()
    try:
        deadline = time.monotonic() + WITHIN_S
        while len(consumer.assignment()) < topics.ACTIONS.partitions:
            assert time.monotonic() < deadline, consumer.assignment()
            await consumer.getmany(timeout_ms=200)
        await consumer.commit({tp: 0 for tp in consumer.assignment()})
    finally:
        await consumer.stop()


async def test_the_actuator_taking_the_lease_over_carries_out_nothing_twice(
    kafka_bootstrap: str,
    topic_prefix: str,
    client: ApiClient,
    namespace: str,
    kubeconfig: Path,
) -> None:
    uids = {n: await running_pod(client, namespace, n, app="nb") for n in ("p1", "p2", "p3")}

    def evict(action_id: str, pod: str) -> tuple[str, bytes]:
        request = EvictPod(id=action_id, namespace=namespace, name=pod, uid=uids[pod], **ENFORCE)
        return action_id, to_json(request)

    actions = topics.ACTIONS.full_name(topic_prefix)
    group = f"{topic_prefix}gpufrag-actuator"
    common = {"mode": "enforce", "namespace": namespace, "settings": LEASE}
    # r1's outcome lands past a batch's worth of other records (the feed reads 100 at a time),
    # so its successor finds it only by reading ahead, not in the batch that holds r1
    others = [("r1", orjson.dumps({"note": n})) for n in range(FILLER)]
    await publish_actions(
        kafka_bootstrap, topic_prefix, [evict("r1", "p1"), *others, evict("r2", "p2")]
    )
    a, a_log = start_actuate(
        kafka_bootstrap, topic_prefix, kubeconfig, metrics_port=free_port(), identity="a", **common
    )
    b = None
    try:
        await _until_holder(client, namespace, "a")
        first = await outcomes_of(kafka_bootstrap, topic_prefix, {"r1", "r2"})
        assert {i: o["outcome"] for i, o in first.items()} == {"r1": "executed", "r2": "executed"}

        a.send_signal(signal.SIGSTOP)
        await _set_back_to_the_start(kafka_bootstrap, group, actions)
        b, b_log = start_actuate(
            kafka_bootstrap,
            topic_prefix,
            kubeconfig,
            metrics_port=free_port(),
            identity="b",
            **common,
        )
        await _until_holder(client, namespace, "b")
        await publish_actions(kafka_bootstrap, topic_prefix, [evict("r3", "p3")])
        third = (await outcomes_of(kafka_bootstrap, topic_prefix, {"r3"}))["r3"]
        assert third["outcome"] == "executed", third
        assert third["evidence"]["actuator"]["holder"] == "b"  # type: ignore[index]
        await until_committed(kafka_bootstrap, topic_prefix)
    finally:
        a.send_signal(signal.SIGCONT)
        for proc in (a, b):
            if proc is not None:
                proc.send_signal(signal.SIGTERM)
        rc_a = await asyncio.to_thread(a.wait, 60)
        rc_b = None if b is None else await asyncio.to_thread(b.wait, 60)
    assert (rc_a, rc_b) == (0, 0), (a_log.read_text()[-2000:], b_log.read_text()[-2000:])

    # one outcome record per action id on the topic, each by the actuator that carried it out
    records = [orjson.loads(r) for r in await every_record(kafka_bootstrap, actions)]
    outcomes = [r for r in records if isinstance(r, dict) and "outcome" in r]
    assert Counter(o["id"] for o in outcomes) == {"r1": 1, "r2": 1, "r3": 1}, outcomes
    assert {o["id"]: o["evidence"]["actuator"]["holder"] for o in outcomes} == {
        "r1": "a",
        "r2": "a",
        "r3": "b",
    }
    b_out = b_log.read_text()
    assert "3 requests read (0 invalid, dead-lettered): 2 already carried out, 1 executed" in (
        b_out
    ), b_out[-3000:]
    for pod in ("p1", "p2", "p3"):
        got = await pod_or_none(client, namespace, pod)
        assert got is None or "deletionTimestamp" in got["metadata"], got
