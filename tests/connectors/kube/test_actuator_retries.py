"""What the real API server will not do on demand, against a scripted one over real HTTP:
5xx answers retried a bounded number of times, a throttling 429 retried, a budget's 429 never,
a Lease lost between tries, node writes that keep losing to a conflict; and dry runs, which
cannot reach an API at all."""

from __future__ import annotations

import asyncio
from typing import Any

from connectors.kube import Actuator, Executor
from models import ActionMode, ActionOutcome, ActuatorSettings, EvictPod, TaintNode
from tests.connectors.kube.actuator_fake import (
    BUDGET,
    CONFLICT,
    EVICTED,
    SERVER_ERROR,
    THROTTLED,
    Script,
    serving,
)
from tests.connectors.kube.actuator_helpers import ENFORCE, Holding, enforcing

EVICTION = ("POST", "/api/v1/namespaces/ml/pods/p/eviction")
NODE = "/api/v1/nodes/n"
FAST = {"retry_initial_s": 0.01, "retry_max_s": 0.02}
REQUEST = EvictPod(id="e1", namespace="ml", name="p", uid="u-1", **ENFORCE)


def _audit(action: Any) -> dict[str, Any]:
    audit: dict[str, Any] = action.evidence["actuator"]
    return audit


async def test_server_errors_are_retried_then_the_eviction_succeeds() -> None:
    script = Script()
    script.on(*EVICTION, SERVER_ERROR, SERVER_ERROR, EVICTED)
    async with serving(script) as client:
        action = await enforcing(client, attempts=4, **FAST).act(REQUEST)

    assert action.outcome is ActionOutcome.EXECUTED
    assert _audit(action)["attempts"] == 3
    sent = script.requests(*EVICTION)
    assert len(sent) == 3
    assert sent[0] == {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": "p", "namespace": "ml"},
        "deleteOptions": {"preconditions": {"uid": "u-1"}},
    }
    assert all(method != "DELETE" for method, _, _ in script.seen)


async def test_server_errors_are_retried_a_bounded_number_of_times() -> None:
    script = Script()
    script.on(*EVICTION, SERVER_ERROR)
    async with serving(script) as client:
        action = await enforcing(client, attempts=3, **FAST).act(REQUEST)

    assert action.outcome is ActionOutcome.FAILED
    assert len(script.requests(*EVICTION)) == 3
    audit = _audit(action)
    assert audit["http_status"] == 500 and audit["attempts"] == 3
    assert "etcdserver: request timed out" in audit["result"]


async def test_throttling_is_retried_but_a_budget_is_final() -> None:
    script = Script()
    script.on(*EVICTION, THROTTLED, BUDGET, EVICTED)
    async with serving(script) as client:
        action = await enforcing(client, attempts=4, **FAST).act(REQUEST)

    assert action.outcome is ActionOutcome.BLOCKED
    assert len(script.requests(*EVICTION)) == 2  # the budget's answer ended it
    assert "needs 1 healthy pods" in _audit(action)["result"]


async def test_a_lease_lost_between_tries_stops_the_retries() -> None:
    script = Script()
    script.on(*EVICTION, SERVER_ERROR)

    class LostAfterFirstTry:
        def holding(self) -> bool:
            return not script.requests(*EVICTION)

    async with serving(script) as client:
        action = await enforcing(client, gate=LostAfterFirstTry(), attempts=10, **FAST).act(REQUEST)

    assert action.outcome is ActionOutcome.REFUSED
    assert len(script.requests(*EVICTION)) == 1


async def test_node_writes_that_keep_conflicting_fail_after_bounded_rounds() -> None:
    node = {"metadata": {"name": "n", "resourceVersion": "7"}, "spec": {}}
    script = Script()
    script.on("GET", NODE, (200, node))
    script.on("PATCH", NODE, CONFLICT)
    async with serving(script) as client:
        action = await enforcing(client, conflict_attempts=3, **FAST).act(
            TaintNode(id="t1", node="n", **ENFORCE)
        )

    assert action.outcome is ActionOutcome.FAILED
    patches = script.requests("PATCH", NODE)
    assert len(patches) == 3
    assert patches[0]["metadata"] == {"resourceVersion": "7"}


class Exploding:
    """An API client on which any use fails the test."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the API client was used: {name}")


async def test_dry_run_never_reaches_an_api() -> None:
    # The dry-run actuator has no executor, so no client, at all.
    proposed = await Actuator(settings=ActuatorSettings()).act(REQUEST)
    assert proposed.outcome is ActionOutcome.PROPOSED
    assert proposed.mode is ActionMode.DRY_RUN
    assert proposed.evidence["actuator"] == {"operation": "evict", "result": "dry run: no API call"}

    # An enforcing actuator given a dry-run request does not touch its client either.
    settings = ActuatorSettings()
    executor = Executor(api_client=Exploding(), gate=Holding(), settings=settings, identity="x")
    dry = REQUEST.model_copy(update={"mode": ActionMode.DRY_RUN})
    assert (await Actuator(settings=settings, executor=executor).act(dry)).outcome is (
        ActionOutcome.PROPOSED
    )


async def test_a_repeat_while_the_first_is_in_flight_waits_for_it() -> None:
    script = Script()
    script.on(*EVICTION, SERVER_ERROR, EVICTED)
    async with serving(script) as client:
        actuator = enforcing(client, retry_initial_s=0.2, retry_max_s=0.2)
        first, second = await asyncio.gather(actuator.act(REQUEST), actuator.act(REQUEST))

    assert first == second
    assert first.outcome is ActionOutcome.EXECUTED
    assert len(script.requests(*EVICTION)) == 2  # one 500 and its retry: one action
