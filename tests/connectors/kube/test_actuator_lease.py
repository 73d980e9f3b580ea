"""The actuator Lease against the real kube-apiserver: two actuators contend, one acts; the
holder that loses the Lease stops enforcing at once; a stopped holder hands it over."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
from kubernetes_asyncio.client import ApiClient, CoordinationV1Api, CoreV1Api

from connectors.kube import LeaseElector
from models import ActionOutcome, ActuatorSettings, TaintNode
from tests.connectors.kube.actuator_helpers import ENFORCE, enforcing, lease_holder, until

pytestmark = pytest.mark.apiserver

# Renewals every 0.5 s, so a loss or a handover shows within a second; a 6 s deadline (12
# renewals) so a busy machine does not lose the Lease by a late renewal. No test waits one out.
TIMING = {"lease_duration_s": 8.0, "renew_deadline_s": 6.0, "renew_interval_s": 0.5}


def _settings(namespace: str) -> ActuatorSettings:
    return ActuatorSettings(namespace=namespace, **TIMING)


@contextlib.asynccontextmanager
async def electing(elector: LeaseElector) -> AsyncIterator[asyncio.Event]:
    stop = asyncio.Event()
    task = asyncio.create_task(elector.run(stop=stop))
    try:
        yield stop
    finally:
        stop.set()
        await asyncio.wait_for(task, 20)


@pytest.fixture
async def node(client: ApiClient, namespace: str) -> AsyncIterator[str]:
    core = CoreV1Api(client)
    name = f"{namespace}-gpu-0"
    await core.create_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})
    yield name
    await core.delete_node(name)


async def test_two_contenders_one_acts(client: ApiClient, namespace: str, node: str) -> None:
    settings = _settings(namespace)
    lost: list[str] = []
    a = LeaseElector(api_client=client, settings=settings, identity="a", on_lost=lost.append)
    b = LeaseElector(api_client=client, settings=settings, identity="b", on_lost=lost.append)
    async with electing(a), electing(b):
        await until(lambda: a.holding() or b.holding(), lambda: "nobody holds")
        holder, other = (a, b) if a.holding() else (b, a)
        # Several renewals later, still one holder, and the other never took over.
        for _ in range(3):
            await asyncio.sleep(settings.renew_interval_s)
            assert holder.holding() and not other.holding()
        assert await lease_holder(client, namespace, "gpufrag-actuator") == holder.identity

        actors = {
            e.identity: enforcing(client, gate=e, identity=e.identity, **TIMING)
            for e in (holder, other)
        }
        outcomes = {
            name: await actor.act(TaintNode(id=f"q-{name}", node=node, **ENFORCE))
            for name, actor in actors.items()
        }
    assert outcomes[holder.identity].outcome is ActionOutcome.EXECUTED
    refused = outcomes[other.identity]
    assert refused.outcome is ActionOutcome.REFUSED
    assert "Lease" in str(refused.evidence["actuator"]["result"])  # type: ignore[index,call-overload]
    assert lost == []


async def test_a_lost_lease_stops_enforcement(client: ApiClient, namespace: str, node: str) -> None:
    settings = _settings(namespace)
    lost: list[str] = []
    a = LeaseElector(api_client=client, settings=settings, identity="a", on_lost=lost.append)
    async with electing(a):
        await until(a.holding, lambda: "a never acquired")
        actor = enforcing(client, gate=a, identity="a", **TIMING)
        ok = await actor.act(TaintNode(id="q1", node=node, **ENFORCE))
        assert ok.outcome is ActionOutcome.EXECUTED

        # Someone else writes the Lease as theirs (an operator, or a contender with a skewed
        # view): at its next renewal a sees another holder and stops.
        leases = CoordinationV1Api(client)
        lease = await leases.read_namespaced_lease("gpufrag-actuator", namespace)
        lease.spec.holder_identity = "intruder"
        lease.spec.renew_time = datetime.now(UTC)
        await leases.replace_namespaced_lease("gpufrag-actuator", namespace, lease)

        await until(lambda: bool(lost), lambda: "on_lost never called")
        assert not a.holding()
        assert "intruder" in lost[0]
        refused = await actor.act(TaintNode(id="q2", node=node, value="x", **ENFORCE))
        assert refused.outcome is ActionOutcome.REFUSED
    assert await lease_holder(client, namespace, "gpufrag-actuator") == "intruder"


async def test_a_stopped_holder_hands_over(client: ApiClient, namespace: str) -> None:
    settings = _settings(namespace)
    a = LeaseElector(api_client=client, settings=settings, identity="a")
    b = LeaseElector(api_client=client, settings=settings, identity="b")
    stop_a = asyncio.Event()
    run_a = asyncio.create_task(a.run(stop=stop_a))
    await until(a.holding, lambda: "a never acquired")
    async with electing(b):
        await asyncio.sleep(settings.renew_interval_s * 2)
        assert not b.holding()
        stop_a.set()
        await asyncio.wait_for(run_a, 20)
        assert not a.holding()
        # Released (holder cleared), so b need not wait out the lease duration.
        await until(b.holding, lambda: "b never took over")
        assert await lease_holder(client, namespace, "gpufrag-actuator") == "b"
