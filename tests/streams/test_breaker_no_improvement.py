"""The planning side's circuit breaker input: an enforced plan whose signal is still open
``breaker_settle_s`` after it did not help, and ``breaker_no_improvement`` of those for one
signal open the breaker, which then holds enforcement back to proposals until its cool-down
ends; a signal that resolves clears its count. All in event time, so both runners agree (the
state travels in ``Acting.snapshot``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import pytest

from models import Action, ActionMode, Signal
from models.actuation import EvictPod
from models.settings import GuardrailSettings, PlannerSettings
from streams.cluster.view import ClusterView
from streams.planners.acting import Acting
from tests.streams.planner_scenarios import T0, PodSpec, build, unplaceable

SETTLE_S, OPEN_S = 600, 1800


def _cluster() -> list[PodSpec]:
    # the 2-GPU job fits no node until s1 moves from a to b (a consolidation)
    return [
        PodSpec(name="s1", gpu_milli=500, priority=0, node="a", cards=(1,)),
        PodSpec(name="s2", gpu_milli=500, priority=50, node="b", cards=(0,)),
        PodSpec(name="s3", gpu_milli=500, priority=50, node="b", cards=(1,)),
        PodSpec(name="job", gpu_milli=1000, gpu_count=2, priority=10),
    ]


def _acting(no_improvement: int) -> Acting:
    # no cooldowns: the same pod may be the victim again, so one signal gets several plans
    return Acting(
        planners=PlannerSettings(),
        guardrails=GuardrailSettings(
            mode="enforce",
            cooldown_pod_s=0,
            cooldown_job_s=0,
            cooldown_node_s=0,
            max_evictions_node=100,
            max_evictions_namespace=100,
            max_evictions_cluster=100,
            breaker_no_improvement=no_improvement,
            breaker_settle_s=SETTLE_S,
            breaker_open_s=OPEN_S,
        ),
    )


def _enforced(out: list[Action | object]) -> bool:
    return any(isinstance(o, EvictPod) and o.mode is ActionMode.ENFORCE for o in out)


def _setup() -> tuple[Signal, ClusterView]:
    p, signals = build({"a": 2, "b": 2}, _cluster())
    signal = unplaceable(signals, "ml/job")
    assert signal is not None
    return signal, p.cluster.view


def test_plans_for_a_signal_that_stays_open_open_the_breaker_until_its_cool_down() -> None:
    signal, view = _setup()
    acting = _acting(no_improvement=2)
    at = T0
    assert _enforced(acting.on_signals(at, [signal], view))  # 1st plan
    at += timedelta(seconds=SETTLE_S + 100)
    assert _enforced(acting.on_signals(at, [signal], view))  # the 1st did not help; 2nd plan
    assert not acting.gate.breaker_open(at)
    at += timedelta(seconds=SETTLE_S + 100)
    held = acting.on_signals(at, [signal], view)  # the 2nd did not help either: it opens
    assert acting.gate.breaker_open(at)
    assert not _enforced(held)
    assert [o.mode for o in held if isinstance(o, Action)] == [ActionMode.DRY_RUN]
    assert "still open" in acting.gate.ledger.breaker_why

    at += timedelta(seconds=OPEN_S - 1)
    assert not _enforced(acting.on_signals(at, [signal], view))
    at += timedelta(seconds=2)
    assert _enforced(acting.on_signals(at, [signal], view))


@dataclass(frozen=True)
class Case:
    name: str
    resolved_after_s: int | None
    """When the signal is seen resolved after the plan (None: never)."""
    opens: bool


@pytest.mark.parametrize(
    "case",
    [
        Case("still open when the plan is judged", None, True),
        Case("resolved before the plan is judged", SETTLE_S - 1, False),
        Case("resolved after: the plan was judged already", SETTLE_S + 1, True),
    ],
    ids=lambda c: c.name,
)
def test_one_plan_without_improvement_with_a_limit_of_one(case: Case) -> None:
    signal, view = _setup()
    acting = _acting(no_improvement=1)
    assert _enforced(acting.on_signals(T0, [signal], view))
    if case.resolved_after_s is not None:
        resolved = signal.model_copy(update={"state": "resolved"})
        acting.on_signals(T0 + timedelta(seconds=case.resolved_after_s), [resolved], view)
    at = T0 + timedelta(seconds=SETTLE_S + 10)
    acting.on_signals(at, [], view)
    assert acting.gate.breaker_open(at) is case.opens
    assert acting.followups == []


def test_the_plans_waiting_to_be_judged_survive_a_restart() -> None:
    signal, view = _setup()
    acting = _acting(no_improvement=1)
    assert _enforced(acting.on_signals(T0, [signal], view))
    restarted = _acting(no_improvement=1)
    restarted.restore(acting.snapshot())
    assert restarted.followups == acting.followups
    at = T0 + timedelta(seconds=SETTLE_S)
    restarted.on_signals(at, [], view)
    assert restarted.gate.breaker_open(at)
