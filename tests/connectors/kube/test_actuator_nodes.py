"""Cordon and taint against the real kube-apiserver, and lifting them: by patch, keeping what
others put on the node, lifting only what gpufrag put there."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from kubernetes_asyncio.client import ApiClient, CoreV1Api

from connectors.kube.act.node_actions import CORDON_ANNOTATION
from models import ActionOutcome, CordonNode, TaintNode, UncordonNode, UntaintNode
from tests.connectors.kube.actuator_helpers import ENFORCE, enforcing, node_of

pytestmark = pytest.mark.apiserver

ADMIN_TAINT = {"key": "example.com/maintenance", "value": "disk", "effect": "NoSchedule"}


@pytest.fixture
async def node(client: ApiClient, namespace: str) -> AsyncIterator[str]:
    """A GPU node (no kubelet behind it) that already carries an administrator's taint."""
    core = CoreV1Api(client)
    name = f"{namespace}-gpu-0"
    body = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"gpufrag.test/run": namespace}},
        "spec": {"taints": [ADMIN_TAINT]},
    }
    await core.create_node(body)
    yield name
    await core.delete_node(name)


def _taints(node: dict[str, object]) -> list[dict[str, str]]:
    return list(node["spec"].get("taints") or [])  # type: ignore[attr-defined]


async def test_taint_and_untaint_keep_other_taints(client: ApiClient, node: str) -> None:
    # The administrator's, and the not-ready taint the API server's admission added.
    others = _taints(await node_of(client, node))
    assert ADMIN_TAINT in others and len(others) == 2
    actuator = enforcing(client)
    taint = TaintNode(id="t1", node=node, value="xid-79", effect="NoSchedule", **ENFORCE)

    added = await actuator.act(taint)

    assert added.outcome is ActionOutcome.EXECUTED, added.evidence
    ours = {"key": "gpufrag.io/quarantine", "value": "xid-79", "effect": "NoSchedule"}
    assert _taints(await node_of(client, node)) == [*others, ours]

    # Another id asking for the same end state changes nothing.
    same = await actuator.act(taint.model_copy(update={"id": "t2"}))
    assert same.outcome is ActionOutcome.EXECUTED
    assert same.evidence["actuator"]["changed"] is False  # type: ignore[index,call-overload]

    lifted = await actuator.act(UntaintNode(id="t3", node=node, **ENFORCE))

    assert lifted.outcome is ActionOutcome.EXECUTED
    assert _taints(await node_of(client, node)) == others
    again = await actuator.act(UntaintNode(id="t4", node=node, **ENFORCE))
    assert again.outcome is ActionOutcome.EXECUTED
    assert again.evidence["actuator"]["changed"] is False  # type: ignore[index,call-overload]


async def test_a_no_execute_taint_carries_its_time(client: ApiClient, node: str) -> None:
    actuator = enforcing(client)

    await actuator.act(TaintNode(id="t5", node=node, effect="NoExecute", **ENFORCE))

    ours = [t for t in _taints(await node_of(client, node)) if t["key"] == "gpufrag.io/quarantine"]
    assert len(ours) == 1 and ours[0]["effect"] == "NoExecute" and "timeAdded" in ours[0]


async def test_cordon_and_uncordon(client: ApiClient, node: str) -> None:
    taints = _taints(await node_of(client, node))
    actuator = enforcing(client)

    cordoned = await actuator.act(CordonNode(id="c1", node=node, **ENFORCE))

    assert cordoned.outcome is ActionOutcome.EXECUTED
    got = await node_of(client, node)
    assert got["spec"]["unschedulable"] is True
    assert got["metadata"]["annotations"][CORDON_ANNOTATION] == "c1"
    assert _taints(got) == taints

    lifted = await actuator.act(UncordonNode(id="c2", node=node, **ENFORCE))

    assert lifted.outcome is ActionOutcome.EXECUTED
    got = await node_of(client, node)
    assert not got["spec"].get("unschedulable")
    assert CORDON_ANNOTATION not in (got["metadata"].get("annotations") or {})


async def test_someone_elses_cordon_is_not_lifted(client: ApiClient, node: str) -> None:
    core = CoreV1Api(client)
    await core.patch_node(
        node, {"spec": {"unschedulable": True}}, _content_type="application/merge-patch+json"
    )
    actuator = enforcing(client)

    cordon = await actuator.act(CordonNode(id="c3", node=node, **ENFORCE))
    assert cordon.outcome is ActionOutcome.EXECUTED
    assert cordon.evidence["actuator"]["changed"] is False  # type: ignore[index,call-overload]
    uncordon = await actuator.act(UncordonNode(id="c4", node=node, **ENFORCE))

    assert uncordon.outcome is ActionOutcome.REFUSED
    assert (await node_of(client, node))["spec"]["unschedulable"] is True


async def test_a_missing_node_is_gone(client: ApiClient, namespace: str) -> None:
    actuator = enforcing(client)

    action = await actuator.act(CordonNode(id="c5", node=f"{namespace}-nowhere", **ENFORCE))

    assert action.outcome is ActionOutcome.GONE
