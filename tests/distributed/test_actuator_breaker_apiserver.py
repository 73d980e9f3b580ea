"""`gpufrag actuate` against a kube-apiserver that refuses evictions: after the configured number
of failed evictions its circuit breaker opens and it carries out nothing more (the next request
is refused without an API call, the pod left alone; `gpufrag_circuit_breaker_trips_total`
counts the trip, and `gpufrag_circuit_breaker_open`, which the chart's GpufragCircuitBreakerOpen
rule alerts on, reads 1 meanwhile: tests/app/test_actuator_breaker.py on a clock it moves), and
once the cool-down has passed it evicts again. The API server's refusal is its own: a
ValidatingAdmissionPolicy that denies every eviction in the test's namespace."""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

import pytest
from kubernetes_asyncio.client import AdmissionregistrationV1Api, ApiClient, CoreV1Api
from kubernetes_asyncio.client.exceptions import ApiException

from models import EvictPod, to_json
from tests.app.metrics_scrape import parse
from tests.connectors.kube.actuator_helpers import ENFORCE, pod_or_none, running_pod
from tests.distributed.actions_topic import (
    WITHIN_S,
    outcomes_of,
    publish_actions,
    start_actuate,
)
from tests.http_probe import get
from tests.ports import free_port

pytestmark = [pytest.mark.kafka, pytest.mark.apiserver]

OPEN_S = 10
"""The cool-down. The request the open breaker must hold back is read right after the two that
trip it (one partition, in order), so no timing decides which side of the trip it falls on."""


def _policy(name: str, namespace: str) -> tuple[dict[str, object], dict[str, object]]:
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["pods/eviction"],
                    }
                ]
            },
            "validations": [{"expression": "false", "message": "evictions are frozen here"}],
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {
            "policyName": name,
            "validationActions": ["Deny"],
            "matchResources": {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
            },
        },
    }
    return policy, binding


async def _eviction_refused(client: ApiClient, namespace: str, pod: str) -> bool:
    """Whether the API server refuses an eviction of ``pod`` now (asked as a dry run)."""
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod}}
    try:
        await CoreV1Api(client).create_namespaced_pod_eviction(pod, namespace, body, dry_run="All")
    except ApiException as exc:
        if exc.status in (403, 422):
            return True
        raise
    return False


async def _until_policy(client: ApiClient, namespace: str, probe: str, *, refused: bool) -> None:
    """An admission policy takes effect once the API server's informer has it: seconds."""
    deadline = time.monotonic() + WITHIN_S
    while await _eviction_refused(client, namespace, probe) != refused:
        assert time.monotonic() < deadline, f"the policy never {'took' if refused else 'left'}"
        await asyncio.sleep(0.2)


def _figure(port: int, name: str) -> float:
    status, body = get(port, "/metrics")
    assert status == 200
    return parse(body)[(name, ())]


async def test_failed_evictions_open_the_breaker_until_its_cool_down(
    kafka_bootstrap: str,
    topic_prefix: str,
    client: ApiClient,
    namespace: str,
    kubeconfig: Path,
) -> None:
    admission = AdmissionregistrationV1Api(client)
    policy, binding = _policy(f"freeze-{namespace}", namespace)
    await admission.create_validating_admission_policy(policy)
    await admission.create_validating_admission_policy_binding(binding)
    uids = {n: await running_pod(client, namespace, n, app="nb") for n in ("p1", "p2", "p3", "p4")}
    await _until_policy(client, namespace, "p4", refused=True)

    def evict(action_id: str, pod: str) -> tuple[str, bytes]:
        request = EvictPod(id=action_id, namespace=namespace, name=pod, uid=uids[pod], **ENFORCE)
        return action_id, to_json(request)

    port = free_port()
    proc, log = start_actuate(
        kafka_bootstrap,
        topic_prefix,
        kubeconfig,
        mode="enforce",
        namespace=namespace,
        metrics_port=port,
        settings={
            "GPUFRAG_GUARDRAILS__BREAKER_FAILURES": "2",
            "GPUFRAG_GUARDRAILS__BREAKER_OPEN_S": str(OPEN_S),
            "GPUFRAG_ACTUATOR__ATTEMPTS": "1",
        },
    )
    try:
        # one key, so one partition: read in this order
        first = [(key, value) for key, value in (evict("f1", "p1"), evict("f2", "p2"))]
        await publish_actions(
            kafka_bootstrap,
            topic_prefix,
            [("k", value) for _, value in [*first, evict("f3", "p3")]],
        )
        got = await outcomes_of(kafka_bootstrap, topic_prefix, {"f1", "f2", "f3"})
        assert [got[i]["outcome"] for i in ("f1", "f2", "f3")] == ["failed", "failed", "refused"]
        assert "evictions are frozen here" in str(got["f2"]["evidence"])
        # f3 never reached the API server: the breaker answered it
        result = got["f3"]["evidence"]["actuator"]["result"]  # type: ignore[index]
        assert "circuit breaker open until" in result and "2 actions failed" in result, got
        assert "http_status" not in got["f3"]["evidence"]["actuator"]  # type: ignore[operator]
        pod = await pod_or_none(client, namespace, "p3")
        assert pod is not None and "deletionTimestamp" not in pod["metadata"]

        # the API server allows evictions again; the breaker closes only after its cool-down
        await admission.delete_validating_admission_policy_binding(f"freeze-{namespace}")
        await _until_policy(client, namespace, "p4", refused=False)
        assert await asyncio.to_thread(_figure, port, "gpufrag_circuit_breaker_trips_total") == 1
        deadline = time.monotonic() + OPEN_S + WITHIN_S
        while await asyncio.to_thread(_figure, port, "gpufrag_circuit_breaker_open") != 0.0:
            assert time.monotonic() < deadline, "the breaker never closed"
            await asyncio.sleep(0.5)
        await publish_actions(kafka_bootstrap, topic_prefix, [evict("f4", "p4")])
        done = (await outcomes_of(kafka_bootstrap, topic_prefix, {"f4"}))["f4"]
        assert done["outcome"] == "executed", done
    finally:
        proc.send_signal(signal.SIGTERM)
        rc = await asyncio.to_thread(proc.wait, 60)
        await admission.delete_validating_admission_policy(f"freeze-{namespace}")
    assert rc == 0, log.read_text()[-3000:]
    assert "circuit breaker open until" in log.read_text()
