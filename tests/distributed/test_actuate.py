"""`gpufrag actuate` end to end, on the real broker and the real kube-apiserver: requests on the
actions topic become outcome records on the same topic (keyed by action id), an enforcing
actuator evicts through the Eviction API while it holds the Lease, a dry-run one touches
nothing, and a request that does not validate lands on the dead-letter topic."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import orjson
import pytest
from kubernetes_asyncio.client import ApiClient

from models import EvictPod, to_json
from streams.distributed import topics
from tests.app.metrics_scrape import Scrape, parse, summed
from tests.connectors.kube.actuator_helpers import (
    ENFORCE,
    lease_holder,
    pod_or_none,
    running_pod,
)
from tests.distributed.actions_topic import (
    WITHIN_S,
    outcomes_of,
    publish_actions,
    start_actuate,
    until_committed,
)
from tests.distributed.worker_helpers import collect
from tests.http_probe import get
from tests.ports import free_port

pytestmark = [pytest.mark.kafka, pytest.mark.apiserver]

BAD = b'{"op": "evict", "id": "bad-1", "kind": "reclaim"}'


async def _actuate(
    bootstrap: str, prefix: str, kubeconfig: Path, ids: set[str], mode: str, namespace: str
) -> tuple[dict[str, dict[str, object]], str, Scrape]:
    """Run `gpufrag actuate` until the outcomes of ``ids`` are on the topic and every record is
    committed, then stop it (SIGTERM); the outcomes, what it printed and its metrics then."""
    port = free_port()
    proc, log = start_actuate(
        bootstrap, prefix, kubeconfig, mode=mode, namespace=namespace, metrics_port=port
    )
    try:
        got = await outcomes_of(bootstrap, prefix, ids)
        await until_committed(bootstrap, prefix)
        status, body = await asyncio.to_thread(get, port, "/metrics")
        assert status == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        rc = await asyncio.to_thread(proc.wait, 60)
    out = log.read_text()
    assert rc == 0, out[-3000:]
    return got, out, parse(body)


async def test_enforce_evicts_and_records_the_outcomes(
    kafka_bootstrap: str,
    topic_prefix: str,
    client: ApiClient,
    namespace: str,
    kubeconfig: Path,
) -> None:
    uid = await running_pod(client, namespace, "notebook", app="nb")
    evict = EvictPod(id="e1", namespace=namespace, name="notebook", uid=uid, **ENFORCE)
    nobody = EvictPod(id="e2", namespace=namespace, name="nobody", **ENFORCE)
    await publish_actions(
        kafka_bootstrap,
        topic_prefix,
        [("e1", to_json(evict)), ("e2", to_json(nobody)), ("bad-1", BAD)],
    )
    got, out, scrape = await _actuate(
        kafka_bootstrap, topic_prefix, kubeconfig, {"e1", "e2"}, "enforce", namespace
    )
    # the records of what it carried out, counted by outcome and mode
    for outcome in ("executed", "gone"):
        n = summed(scrape, "gpufrag_actions_total", mode="enforce", outcome=outcome)
        assert n == 1, outcome
    assert (got["e1"]["outcome"], got["e2"]["outcome"]) == ("executed", "gone"), got
    assert {a["mode"] for a in got.values()} == {"enforce"}
    assert got["e1"]["evidence"]["actuator"]["holder"] == "actuate-test"  # type: ignore[index]
    pod = await pod_or_none(client, namespace, "notebook")
    # No kubelet confirms the end of a graceful deletion: the pod is gone or terminating.
    assert pod is None or "deletionTimestamp" in pod["metadata"], pod
    assert "3 requests read (1 invalid, dead-lettered): 1 executed, 1 gone" in out, out[-3000:]
    # stopped: the Lease was released for a standby
    assert await lease_holder(client, namespace, "gpufrag-actuator") is None
    letters = await collect(
        kafka_bootstrap, topics.DEAD_LETTER.full_name(topic_prefix), until=1, timeout_s=WITHIN_S
    )
    body = orjson.loads(letters[0])
    assert (body["source"], body["reason"], body["raw"]) == (
        f"kafka/{topics.ACTIONS.full_name(topic_prefix)}",
        "invalid_action_request",
        BAD.decode(),
    )


async def test_without_enforce_every_request_is_proposed(
    kafka_bootstrap: str,
    topic_prefix: str,
    client: ApiClient,
    namespace: str,
    kubeconfig: Path,
) -> None:
    uid = await running_pod(client, namespace, "trainer", app="train")
    evict = EvictPod(id="d1", namespace=namespace, name="trainer", uid=uid, **ENFORCE)
    await publish_actions(kafka_bootstrap, topic_prefix, [("d1", to_json(evict))])
    got, out, scrape = await _actuate(
        kafka_bootstrap, topic_prefix, kubeconfig, {"d1"}, "dry-run", namespace
    )
    assert summed(scrape, "gpufrag_actions_total", mode="dry_run", outcome="proposed") == 1
    assert (got["d1"]["outcome"], got["d1"]["mode"]) == ("proposed", "dry_run"), got
    pod = await pod_or_none(client, namespace, "trainer")
    assert pod is not None and "deletionTimestamp" not in pod["metadata"]
    assert "1 requests read (0 invalid, dead-lettered): 1 proposed" in out, out[-3000:]
