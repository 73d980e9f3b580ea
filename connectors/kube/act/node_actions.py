"""Cordon and taint by patch, as read-modify-write rounds guarded by the node's
resourceVersion: a merge patch that names it is refused with 409 if anyone wrote the node in
between (the node controller updates taints too), and the round starts again from a fresh read.

Each change is stated as the end state (cordoned, this taint present or absent), so doing it
again, after a restart too, changes nothing: the second patch is not even sent.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import aiohttp
from kubernetes_asyncio import client as k8s

from connectors.kube.act.calls import Answer, Calls, ConflictsExhausted
from connectors.kube.act.eviction import Done
from models import ActionOutcome, CordonNode, TaintNode, UncordonNode, UntaintNode
from models.actuation import OUR_PREFIX

__all__ = ["CORDON_ANNOTATION", "change_node"]

CORDON_ANNOTATION = f"{OUR_PREFIX}cordoned-by"
"""Set (to the action id) when gpufrag cordoned the node; an uncordon lifts only such a cordon."""

NodeRequest = CordonNode | UncordonNode | TaintNode | UntaintNode
Plan = tuple[dict[str, Any] | None, str]
"""(the merge patch to send, or None when the node is already as asked; what it does)."""


def _annotations(node: dict[str, Any]) -> dict[str, str]:
    return dict((node.get("metadata") or {}).get("annotations") or {})


def _plan_cordon(node: dict[str, Any], request: CordonNode) -> Plan:
    if CORDON_ANNOTATION in _annotations(node) and node["spec"].get("unschedulable"):
        return None, "already cordoned by gpufrag"
    if node["spec"].get("unschedulable"):
        return None, "already cordoned by someone else: left unmarked, an uncordon will not lift it"
    patch = {
        "metadata": {"annotations": {CORDON_ANNOTATION: request.id}},
        "spec": {"unschedulable": True},
    }
    return patch, "cordoned"


def _plan_uncordon(node: dict[str, Any]) -> Plan | Done:
    ours = CORDON_ANNOTATION in _annotations(node)
    if node["spec"].get("unschedulable") and not ours:
        return Done(ActionOutcome.REFUSED, "cordoned by someone else, not gpufrag", changed=False)
    if not ours:
        return None, "not cordoned"
    # null deletes a key in a merge patch: the annotation goes, unschedulable back to unset
    patch = {
        "metadata": {"annotations": {CORDON_ANNOTATION: None}},
        "spec": {"unschedulable": None},
    }
    return patch, "uncordoned"


def _plan_taint(node: dict[str, Any], request: TaintNode, now: datetime) -> Plan:
    taints: list[dict[str, Any]] = list(node["spec"].get("taints") or [])
    same = [t for t in taints if t.get("key") == request.key and t.get("effect") == request.effect]
    if same and (same[0].get("value") or "") == request.value:
        return None, "taint already present"
    taint: dict[str, Any] = {"key": request.key, "effect": request.effect}
    if request.value:
        taint["value"] = request.value
    if request.effect == "NoExecute":
        # As kubectl does: tolerationSeconds count from here.
        taint["timeAdded"] = now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    kept = [t for t in taints if t not in same]
    return {"spec": {"taints": [*kept, taint]}}, "tainted"


def _plan_untaint(node: dict[str, Any], request: UntaintNode) -> Plan:
    taints: list[dict[str, Any]] = list(node["spec"].get("taints") or [])

    def ours(t: dict[str, Any]) -> bool:
        return t.get("key") == request.key and request.effect in (None, t.get("effect"))

    kept = [t for t in taints if not ours(t)]
    if len(kept) == len(taints):
        return None, "taint already absent"
    return {"spec": {"taints": kept or None}}, "taint removed"


def _plan(node: dict[str, Any], request: NodeRequest, now: datetime) -> Plan | Done:
    node.setdefault("spec", {})
    if isinstance(request, CordonNode):
        return _plan_cordon(node, request)
    if isinstance(request, UncordonNode):
        return _plan_uncordon(node)
    if isinstance(request, TaintNode):
        return _plan_taint(node, request, now)
    return _plan_untaint(node, request)


def _unexpected(answer: Answer, attempts: int) -> Done:
    if answer.status == 404:
        return Done(ActionOutcome.GONE, answer.message, 404, attempts, changed=False)
    detail = f"HTTP {answer.status}: {answer.message}"
    return Done(ActionOutcome.FAILED, detail, answer.status, attempts, changed=False)


async def change_node(
    calls: Calls, api_client: Any, request: NodeRequest, *, now: Callable[[], datetime]
) -> Done:
    core: Any = k8s.CoreV1Api(api_client)
    attempts = 0
    for _ in range(calls.settings.conflict_attempts):

        async def read(timeout: aiohttp.ClientTimeout) -> aiohttp.ClientResponse:
            r: aiohttp.ClientResponse = await core.read_node(
                request.node, _preload_content=False, _request_timeout=timeout
            )
            return r

        got = await calls.call(read)
        attempts += got.attempts
        if got.status != 200:
            return _unexpected(got, attempts)
        plan = _plan(got.body, request, now())
        if isinstance(plan, Done):
            return Done(plan.outcome, plan.detail, got.status, attempts, changed=False)
        patch, what = plan
        if patch is None:
            return Done(ActionOutcome.EXECUTED, what, got.status, attempts, changed=False)
        version = got.body["metadata"]["resourceVersion"]
        patch.setdefault("metadata", {})["resourceVersion"] = version

        async def write(timeout: aiohttp.ClientTimeout, body: Any = patch) -> Any:
            return await core.patch_node(
                request.node,
                body,
                _content_type="application/merge-patch+json",
                _preload_content=False,
                _request_timeout=timeout,
            )

        put = await calls.call(write)
        attempts += put.attempts
        if put.status == 200:
            return Done(ActionOutcome.EXECUTED, what, put.status, attempts)
        if put.status != 409:
            return _unexpected(put, attempts)
    raise ConflictsExhausted(
        f"another writer changed the node each of {calls.settings.conflict_attempts} rounds",
        status=409,
        attempts=attempts,
    )
