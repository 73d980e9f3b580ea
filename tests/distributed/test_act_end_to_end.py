"""Worker, actuator and sink together, on the real broker and the real kube-apiserver: a Faust
worker in enforce mode plans a consolidation (a two-GPU job fits no node while a half-used card
could be freed), `gpufrag actuate` evicts the pod through the Eviction API, and `gpufrag sink`
stores the outcome over the proposal: one audit row, `executed`, for a pod the API server has
really evicted."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson
import pytest
from kubernetes_asyncio.client import ApiClient

from models import Envelope, PodEvent, to_json
from streams.app.sinks.topic_sink import sink_topics
from streams.distributed import topics
from tests.connectors.kube.actuator_helpers import pod_or_none, running_pod
from tests.distributed.actions_topic import WITHIN_S, start_actuate
from tests.distributed.consolidation_scenario import events
from tests.distributed.history_compare import rows
from tests.distributed.worker_helpers import (
    collect,
    publish,
    start_sink,
    start_worker,
    stop_processes,
    wait_caught_up,
)
from tests.ports import free_port

pytestmark = [pytest.mark.kafka, pytest.mark.apiserver]

ENFORCE = {"GPUFRAG_GUARDRAILS__MODE": "enforce"}


def _in_cluster(envs: list[Envelope], namespace: str, uid: str) -> list[Envelope]:
    """The scenario's pods in the test's namespace, and s1 (the one to evict) with the uid the
    API server gave it: the eviction's precondition."""
    out = []
    for env in envs:
        if isinstance(env.payload, PodEvent) and env.payload.pod.namespace == "ml":
            pod = env.payload.pod.model_copy(update={"namespace": namespace})
            if pod.name == "s1":
                pod = pod.model_copy(update={"uid": uid})
            payload = env.payload.model_copy(update={"pod": pod})
            env = Envelope.wrap(payload, event_time=env.event_time, source=env.source)
        out.append(env)
    return out


def _outcome(raw: list[bytes]) -> dict[str, object] | None:
    """The actuator's record of what it did (the worker's proposal has no actuator evidence)."""
    for r in raw:
        body = orjson.loads(r)
        if isinstance(body, dict) and "actuator" in (body.get("evidence") or {}):
            return body
    return None


async def test_a_planned_eviction_is_carried_out_and_stored_once(
    kafka_bootstrap: str,
    topic_prefix: str,
    client: ApiClient,
    namespace: str,
    kubeconfig: Path,
    tmp_path: Path,
) -> None:
    uid = await running_pod(client, namespace, "s1", app="s")
    file = tmp_path / "events.jsonl"
    file.write_bytes(b"".join(to_json(e) + b"\n" for e in _in_cluster(events(), namespace, uid)))
    store = f"chdb://{tmp_path / 'store'}"
    worker = start_worker(kafka_bootstrap, topic_prefix, tmp_path / "worker.log", extra_env=ENFORCE)
    sink = start_sink(kafka_bootstrap, topic_prefix, store, tmp_path / "sink.log")
    actuate, actuate_log = start_actuate(
        kafka_bootstrap,
        topic_prefix,
        kubeconfig,
        mode="enforce",
        namespace=namespace,
        metrics_port=free_port(),
    )
    try:
        await asyncio.to_thread(publish, kafka_bootstrap, topic_prefix, "--file", str(file))
        raw = await collect(
            kafka_bootstrap,
            topics.ACTIONS.full_name(topic_prefix),
            done=lambda got: _outcome(got) is not None,
            timeout_s=WITHIN_S * 2,
        )
        outcome = _outcome(raw)
        assert outcome is not None and outcome["outcome"] == "executed", outcome
        assert outcome["target"] == f"{namespace}/s1", outcome
        group = f"{topic_prefix}gpufrag-sink"
        await asyncio.to_thread(wait_caught_up, kafka_bootstrap, group, sink_topics(topic_prefix))
    finally:
        await asyncio.to_thread(stop_processes, worker, sink, actuate)
    assert sink.returncode == 0, (tmp_path / "sink.log").read_text()[-3000:]
    assert actuate.returncode == 0, actuate_log.read_text()[-3000:]

    stored = rows(
        store,
        "SELECT id, kind, mode, outcome, target FROM actions FINAL WHERE run_id = {run_id:String}",
        "live",
    )
    assert stored == [(outcome["id"], "consolidate", "enforce", "executed", f"{namespace}/s1")]
    pod = await pod_or_none(client, namespace, "s1")
    # No kubelet confirms the end of a graceful deletion: the pod is gone or terminating.
    assert pod is None or "deletionTimestamp" in pod["metadata"], pod
