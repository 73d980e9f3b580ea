"""The actuator's circuit breaker, on a clock the test moves: the configured number of failed
actions within the window opens it, an open breaker carries out nothing (each enforce request
is refused with why, and the API is not called), and it closes once its cool-down has passed.
The real API server's refusals: tests/distributed/test_actuator_breaker_apiserver.py."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from prometheus_client import CollectorRegistry, generate_latest

from models import Action, ActionMode, ActionOutcome, ActionRequest, EvictPod
from models.action_settings import GuardrailSettings
from models.actuation import ACTUATOR_EVIDENCE_KEY
from streams.app.sinks.actuator_breaker import BreakerGauge, BreakingActuator
from tests.connectors.kube.actuator_helpers import ENFORCE

T0 = datetime(2026, 12, 6, 12, tzinfo=UTC)


@dataclass
class _Cluster:
    """An actuator whose answers the test chooses: each call takes the next outcome."""

    answers: list[ActionOutcome]
    called: list[str] = field(default_factory=list)

    async def act(self, request: ActionRequest) -> Action:
        self.called.append(request.id)
        return Action(
            id=request.id,
            kind=request.kind,
            mode=request.mode,
            outcome=self.answers.pop(0),
            target_scope=request.target_scope,
            target=request.target,
            reason=request.reason,
            created_at=T0,
        )


@dataclass
class _Clock:
    now: datetime = T0

    def __call__(self) -> datetime:
        return self.now


def _evict(n: int, **over: object) -> EvictPod:
    return EvictPod(id=f"a{n}", namespace="ml", name=f"pod-{n}", **{**ENFORCE, **over})


def _scrape(gauge: BreakerGauge) -> bytes:
    registry = CollectorRegistry()
    registry.register(gauge)
    return generate_latest(registry)


def test_failures_open_it_and_it_closes_after_the_cool_down() -> None:
    settings = GuardrailSettings(
        mode="enforce", breaker_failures=2, breaker_open_s=300, window_s=600
    )
    cluster = _Cluster([ActionOutcome.FAILED, ActionOutcome.EXECUTED, ActionOutcome.FAILED])
    clock = _Clock()
    breaker = BreakingActuator(cluster, settings=settings, clock=clock)
    gauge = BreakerGauge()
    gauge.watch(breaker)
    outcomes = []
    for n in range(3):  # failed, executed, failed: the second failure within the window trips
        clock.now += timedelta(seconds=10)
        outcomes.append(asyncio.run(breaker.act(_evict(n))).outcome)
    assert outcomes == [ActionOutcome.FAILED, ActionOutcome.EXECUTED, ActionOutcome.FAILED]
    assert breaker.is_open() and breaker.trips == 1
    scraped = _scrape(gauge)
    assert b"gpufrag_circuit_breaker_open 1.0" in scraped
    assert b"gpufrag_circuit_breaker_trips_total 1.0" in scraped

    clock.now += timedelta(seconds=299)
    held = asyncio.run(breaker.act(_evict(3)))
    assert held.outcome is ActionOutcome.REFUSED and held.mode is ActionMode.ENFORCE
    result = str(held.evidence[ACTUATOR_EVIDENCE_KEY]["result"])  # type: ignore[index]
    assert result.startswith("circuit breaker open until 2026-12-06T12:05:30+00:00")
    assert "2 actions failed" in result
    assert cluster.called == ["a0", "a1", "a2"]  # nothing reached the cluster

    cluster.answers.append(ActionOutcome.PROPOSED)
    dry = asyncio.run(breaker.act(_evict(4, mode=ActionMode.DRY_RUN)))
    assert cluster.called[-1] == "a4" and dry.mode is ActionMode.DRY_RUN  # not held back

    clock.now += timedelta(seconds=1)  # the cool-down is over
    cluster.answers.append(ActionOutcome.EXECUTED)
    assert not breaker.is_open()
    assert b"gpufrag_circuit_breaker_open 0.0" in _scrape(gauge)
    assert asyncio.run(breaker.act(_evict(5))).outcome is ActionOutcome.EXECUTED


def test_failures_spread_wider_than_the_window_do_not_open_it() -> None:
    settings = GuardrailSettings(mode="enforce", breaker_failures=2, window_s=60)
    cluster = _Cluster([ActionOutcome.FAILED, ActionOutcome.FAILED])
    clock = _Clock()
    breaker = BreakingActuator(cluster, settings=settings, clock=clock)
    asyncio.run(breaker.act(_evict(0)))
    clock.now += timedelta(seconds=61)
    asyncio.run(breaker.act(_evict(1)))
    assert not breaker.is_open() and breaker.trips == 0


def test_refused_blocked_and_gone_are_the_clusters_answers_not_failures() -> None:
    settings = GuardrailSettings(mode="enforce", breaker_failures=1)
    answers = [ActionOutcome.BLOCKED, ActionOutcome.GONE, ActionOutcome.REFUSED]
    breaker = BreakingActuator(_Cluster(list(answers)), settings=settings, clock=_Clock())
    for n in range(3):
        asyncio.run(breaker.act(_evict(n)))
    assert not breaker.is_open()
