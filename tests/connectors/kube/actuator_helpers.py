"""Objects and actuators for the actuator tests against the real kube-apiserver.

No kubelet, scheduler or controller-manager runs: a test makes a pod Running and Ready itself
(status subresource), and writes a PodDisruptionBudget's status as the disruption controller
would, since the Eviction API reads only that status to decide.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from typing import Any

from kubernetes_asyncio.client import ApiClient, CoordinationV1Api, CoreV1Api, PolicyV1Api

from connectors.kube import Actuator, Executor, LeaseGate
from models import ActionKind, ActionMode, ActuatorSettings

WAIT_S = 20.0
"""Upper bound for anything that should happen promptly (a busy 2-core machine)."""
FINGERPRINT = "0123456789abcdef"
ENFORCE = {"kind": ActionKind.RECLAIM, "mode": ActionMode.ENFORCE, "reason": "test"}


class Holding:
    """A gate that is open until closed: the tests that are not about the Lease."""

    def __init__(self) -> None:
        self.open = True

    def holding(self) -> bool:
        return self.open


def enforcing(
    client: ApiClient, *, gate: LeaseGate | None = None, identity: str = "test", **settings: Any
) -> Actuator:
    s = ActuatorSettings(**settings)
    executor = Executor(
        api_client=client,
        gate=gate or Holding(),
        settings=s,
        identity=identity,
        rng=random.Random(3),
    )
    return Actuator(settings=s, executor=executor)


async def running_pod(client: ApiClient, namespace: str, name: str, **labels: str) -> str:
    """A pod bound to no node, made Running and Ready as a kubelet would report it; its uid.
    (A Pending pod would not do: the Eviction API ignores budgets for Pending pods.)"""
    core = CoreV1Api(client)
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "main", "image": "registry.invalid/train:1"}]},
    }
    created = await core.create_namespaced_pod(namespace, pod)
    status = {
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}],
        }
    }
    await core.patch_namespaced_pod_status(
        name, namespace, status, _content_type="application/merge-patch+json"
    )
    return str(created.metadata.uid)


async def pdb_allowing_none(client: ApiClient, namespace: str, name: str, app: str) -> None:
    """A budget of minAvailable 1 over the pods labelled ``app``, and the status the disruption
    controller would write for one healthy pod: no disruption allowed."""
    policy = PolicyV1Api(client)
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": app}}},
    }
    created = await policy.create_namespaced_pod_disruption_budget(namespace, pdb)
    status = {
        "status": {
            # Below the generation, the Eviction API refuses as "still being processed".
            "observedGeneration": created.metadata.generation,
            "disruptionsAllowed": 0,
            "currentHealthy": 1,
            "desiredHealthy": 1,
            "expectedPods": 1,
        }
    }
    await policy.patch_namespaced_pod_disruption_budget_status(
        name, namespace, status, _content_type="application/merge-patch+json"
    )


async def pod_or_none(client: ApiClient, namespace: str, name: str) -> dict[str, Any] | None:
    core = CoreV1Api(client)
    response = await core.read_namespaced_pod(name, namespace, _preload_content=False)
    async with response:
        if response.status == 404:
            return None
        assert response.status == 200, await response.text()
        pod: dict[str, Any] = await response.json()
        return pod


async def node_of(client: ApiClient, name: str) -> dict[str, Any]:
    core = CoreV1Api(client)
    response = await core.read_node(name, _preload_content=False)
    async with response:
        assert response.status == 200, await response.text()
        node: dict[str, Any] = await response.json()
        return node


async def lease_holder(client: ApiClient, namespace: str, name: str) -> str | None:
    lease = await CoordinationV1Api(client).read_namespaced_lease(name, namespace)
    return lease.spec.holder_identity  # type: ignore[no-any-return]


async def until(predicate: Callable[[], bool], what: Callable[[], object]) -> None:
    """Wait for ``predicate``; on timeout, fail showing ``what()``."""
    deadline = asyncio.get_running_loop().time() + WAIT_S
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"still not there after {WAIT_S} s: {what()!r}")
        await asyncio.sleep(0.02)
