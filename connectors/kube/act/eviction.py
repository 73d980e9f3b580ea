"""Pod eviction through the Eviction API (policy/v1), never a delete: the API server checks
the pod's PodDisruptionBudgets before it deletes anything, and a refusal is final for us."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import aiohttp
from kubernetes_asyncio import client as k8s

from connectors.kube.act.calls import Answer, Calls
from models import ActionOutcome, EvictPod

__all__ = ["Done", "evict", "eviction_body"]


@dataclass(frozen=True, slots=True)
class Done:
    """The cluster's final answer to one action."""

    outcome: ActionOutcome
    detail: str
    status: int = 0
    attempts: int = 0
    changed: bool = True


def eviction_body(request: EvictPod) -> dict[str, Any]:
    delete_options: dict[str, Any] = {}
    if request.uid is not None:
        delete_options["preconditions"] = {"uid": request.uid}
    if request.grace_period_s is not None:
        delete_options["gracePeriodSeconds"] = request.grace_period_s
    body: dict[str, Any] = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": request.name, "namespace": request.namespace},
    }
    if delete_options:
        body["deleteOptions"] = delete_options
    return body


def _judge(answer: Answer) -> Done:
    a = answer
    if 200 <= a.status < 300:
        return Done(ActionOutcome.EXECUTED, "evicted", a.status, a.attempts)
    if a.disruption_budget:
        # Recorded, never forced: no retry here and no fallback to a delete.
        detail = "; ".join([a.message, *a.causes])
        return Done(ActionOutcome.BLOCKED, detail, a.status, a.attempts, changed=False)
    if a.status == 404:
        return Done(ActionOutcome.GONE, a.message, a.status, a.attempts, changed=False)
    return Done(ActionOutcome.FAILED, f"HTTP {a.status}: {a.message}", a.status, a.attempts, False)


async def evict(calls: Calls, api_client: Any, request: EvictPod) -> Done:
    core: Any = k8s.CoreV1Api(api_client)
    body = eviction_body(request)

    async def send(timeout: aiohttp.ClientTimeout) -> aiohttp.ClientResponse:
        response: aiohttp.ClientResponse = await core.create_namespaced_pod_eviction(
            request.name,
            request.namespace,
            body,
            _preload_content=False,
            _request_timeout=timeout,
        )
        return response

    answer = await calls.call(send)
    if answer.status == 409 and request.uid is not None and await _replaced(calls, core, request):
        # The name now belongs to another pod (a controller recreated it): ours is gone. Asked
        # rather than read from the message, whose wording changes between releases.
        return Done(ActionOutcome.GONE, answer.message, 409, answer.attempts, changed=False)
    return _judge(answer)


async def _replaced(calls: Calls, core: Any, request: EvictPod) -> bool:
    async def read(timeout: aiohttp.ClientTimeout) -> aiohttp.ClientResponse:
        r: aiohttp.ClientResponse = await core.read_namespaced_pod(
            request.name, request.namespace, _preload_content=False, _request_timeout=timeout
        )
        return r

    pod = await calls.call(read)
    if pod.status == 404:
        return True
    return pod.status == 200 and (pod.body.get("metadata") or {}).get("uid") != request.uid
