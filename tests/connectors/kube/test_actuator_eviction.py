"""Evictions against the real kube-apiserver: through the Eviction API only, a
PodDisruptionBudget's 429 recorded as blocked and never forced, a pod already gone (404, or its
name taken by another pod) recorded as gone, and each action id carried out once."""

from __future__ import annotations

import pytest
from kubernetes_asyncio.client import ApiClient

from models import ActionMode, ActionOutcome, EvictPod, Scope
from tests.connectors.kube.actuator_helpers import (
    ENFORCE,
    FINGERPRINT,
    enforcing,
    pdb_allowing_none,
    pod_or_none,
    running_pod,
)

pytestmark = pytest.mark.apiserver


async def test_a_budget_that_allows_no_disruption_blocks_the_eviction(
    client: ApiClient, namespace: str
) -> None:
    uid = await running_pod(client, namespace, "trainer", app="train")
    await pdb_allowing_none(client, namespace, "train-pdb", "train")
    actuator = enforcing(client)
    request = EvictPod(
        id="a1",
        namespace=namespace,
        name="trainer",
        uid=uid,
        signal_fingerprint=FINGERPRINT,
        evidence={"idle_minutes": 45},
        **ENFORCE,
    )

    action = await actuator.act(request)

    assert action.outcome is ActionOutcome.BLOCKED
    assert action.mode is ActionMode.ENFORCE
    assert (action.target_scope, action.target) == (Scope.POD, f"{namespace}/trainer")
    assert action.signal_fingerprint == FINGERPRINT
    assert action.evidence["idle_minutes"] == 45
    audit = action.evidence["actuator"]
    assert isinstance(audit, dict)
    assert audit["http_status"] == 429
    assert audit["attempts"] == 1  # a budget's no is final: not retried
    assert "disruption budget" in str(audit["result"])
    pod = await pod_or_none(client, namespace, "trainer")
    assert pod is not None and "deletionTimestamp" not in pod["metadata"]

    # Asking again (same id) asks the cluster again, and is refused again: blocked is not final.
    again = await actuator.act(request)
    assert again.outcome is ActionOutcome.BLOCKED
    assert await pod_or_none(client, namespace, "trainer") is not None


async def test_an_eviction_goes_through_when_nothing_forbids_it(
    client: ApiClient, namespace: str
) -> None:
    uid = await running_pod(client, namespace, "notebook", app="nb")
    actuator = enforcing(client)
    request = EvictPod(id="a2", namespace=namespace, name="notebook", uid=uid, **ENFORCE)

    action = await actuator.act(request)

    assert action.outcome is ActionOutcome.EXECUTED, action.evidence
    pod = await pod_or_none(client, namespace, "notebook")
    # No kubelet confirms the end of a graceful deletion: the pod is gone or terminating.
    assert pod is None or "deletionTimestamp" in pod["metadata"]


async def test_a_pod_already_gone_is_recorded_as_gone(client: ApiClient, namespace: str) -> None:
    actuator = enforcing(client)

    action = await actuator.act(EvictPod(id="a3", namespace=namespace, name="nobody", **ENFORCE))

    assert action.outcome is ActionOutcome.GONE
    assert action.evidence["actuator"]["http_status"] == 404  # type: ignore[index,call-overload]


async def test_a_pod_recreated_under_the_name_is_left_alone(
    client: ApiClient, namespace: str
) -> None:
    uid = await running_pod(client, namespace, "worker", app="w")
    actuator = enforcing(client)
    first = await actuator.act(
        EvictPod(id="a4", namespace=namespace, name="worker", uid=uid, grace_period_s=0, **ENFORCE)
    )
    assert first.outcome is ActionOutcome.EXECUTED
    assert await pod_or_none(client, namespace, "worker") is None  # grace 0: deleted at once
    await running_pod(client, namespace, "worker", app="w")  # a controller's replacement

    # A new action aimed at the old incarnation: the uid precondition stops it.
    stale = await actuator.act(
        EvictPod(id="a5", namespace=namespace, name="worker", uid=uid, **ENFORCE)
    )

    assert stale.outcome is ActionOutcome.GONE
    assert "UID" in str(stale.evidence["actuator"]["result"])  # type: ignore[index,call-overload]
    assert await pod_or_none(client, namespace, "worker") is not None


async def test_the_same_action_id_is_carried_out_once(client: ApiClient, namespace: str) -> None:
    await running_pod(client, namespace, "job", app="j")
    actuator = enforcing(client)
    request = EvictPod(id="a6", namespace=namespace, name="job", grace_period_s=0, **ENFORCE)
    first = await actuator.act(request)
    assert first.outcome is ActionOutcome.EXECUTED
    await running_pod(client, namespace, "job", app="j")

    # Had the API been called again, this pod (no uid precondition) would be evicted too.
    second = await actuator.act(request)

    assert second == first
    assert await pod_or_none(client, namespace, "job") is not None
    other = await actuator.act(request.model_copy(update={"name": "another"}))
    assert other.outcome is ActionOutcome.REFUSED
    assert "already used" in str(other.evidence["actuator"]["result"])  # type: ignore[index,call-overload]
