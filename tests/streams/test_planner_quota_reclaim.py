"""The quota reclaim planner's search, on small clusters with real-shaped Volcano queues fed
through the pipeline's join and detectors: the queue's ``quota_exhausted`` signal in, a plan
or the reason there is none out.

Each row of the table is a cluster (one 8-GPU node, queue serve full), the pending pod's
priority, and what the plan evicts (or the no-fix code)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from connectors.kube.watch.queue_objects import volcano_queue_from_dict
from models import Envelope, Signal, SignalKind
from models.actions import NoFix
from models.settings import GuardrailSettings, PlannerSettings
from streams.pipeline import define_pipeline
from streams.planners.acting import Acting
from streams.planners.plan import Plan
from streams.planners.quota_reclaim import KIND, QuotaReclaim
from tests.app.embedded_store import minute_apart
from tests.streams.pipeline_feed import feed
from tests.streams.planner_scenarios import settings
from tests.streams.quota_scenarios import VQ_SERVE, gpu_node, gpu_pod, queued, volcano_queue

POD = "web/api"


@dataclass(frozen=True, slots=True)
class Case:
    serve: tuple[int, int, int]
    """serve's deserved, capability, allocated GPUs."""
    running: list[tuple[str, int, int]]
    """(name in batch, GPUs, priority), bound one minute apart in this order, in serve."""
    asks: int
    priority: int
    evicts: list[str] = field(default_factory=list)
    no_fix: str | None = None
    prod: tuple[int, int] | None = None
    """Another top-level queue prod (deserved, one pod's GPUs): the cohort serve borrows from."""

    def steps(self) -> list[list[Envelope]]:
        deserved, capability, allocated = self.serve
        first = [gpu_node("gpu-1"), _queue("serve", deserved, capability, allocated)]
        if self.prod is not None:
            share, used = self.prod
            first += [
                _queue("prod", share, share, used),
                gpu_pod("prod-0", "prod", gpus=used, on="gpu-1", queue="prod", priority=0),
            ]
        bound = [
            [gpu_pod(name, "batch", gpus=gpus, on="gpu-1", queue="serve", priority=priority)]
            for name, gpus, priority in self.running
        ]
        waiting = [gpu_pod("api", "web", gpus=self.asks, queue="serve", priority=self.priority)]
        return [first, *bound, waiting]


def _queue(name: str, deserved: int, capability: int, allocated: int) -> Envelope:
    q = volcano_queue(name, deserved=deserved, capability=capability, allocated=allocated)
    return queued(volcano_queue_from_dict(q))


CASES = {
    # the 4-GPU pod alone frees enough quota: one victim, not the two 1-GPU ones
    "fewest": Case(
        serve=(6, 6, 6),
        running=[("one-a", 1, 0), ("one-b", 1, 0), ("four", 4, 0)],
        asks=3,
        priority=100,
        evicts=["batch/four"],
    ),
    # 2 GPUs free on the node, the pod asks 4: two victims free the quota and the node's room
    "the victims' room counts": Case(
        serve=(6, 6, 6),
        running=[("a", 2, 0), ("b", 2, 0), ("c", 2, 5)],
        asks=4,
        priority=100,
        evicts=["batch/a", "batch/b"],
    ),
    # serve borrows prod's idle 2 GPUs: b, bound after serve's deserved 2 were used, is the
    # borrower and goes first though a has the lower priority
    "borrower first": Case(
        serve=(2, 4, 4),
        running=[("a", 2, 0), ("b", 2, 5)],
        asks=2,
        priority=100,
        prod=(4, 2),
        evicts=["batch/b"],
    ),
    # every pod of the queue is of the pending pod's priority: the gate's gap refuses them all
    "nothing lower": Case(
        serve=(4, 4, 4),
        running=[("a", 2, 100), ("b", 2, 100)],
        asks=2,
        priority=100,
        no_fix="priority_gap",
    ),
    # the queue reports 4 GPUs used, its one running pod holds 1: gone, it frees too little
    "too little": Case(
        serve=(4, 4, 4),
        running=[("a", 1, 0)],
        asks=2,
        priority=100,
        no_fix="too_little",
    ),
    # the pod the gate allows to go holds too little; the one that would do is not lower
    "too little allowed": Case(
        serve=(4, 4, 4),
        running=[("a", 1, 0), ("b", 3, 100)],
        asks=2,
        priority=100,
        no_fix="priority_gap",
    ),
}


def _planned(case: Case) -> tuple[Plan | NoFix | None, Signal]:
    p = define_pipeline(settings(mode="dry-run")).build()
    signals: list[Signal] = []
    for env in minute_apart(case.steps()):
        signals += feed(p, env)
    (signal,) = [
        s
        for s in signals
        if s.kind == SignalKind.QUOTA_EXHAUSTED and s.scope_id == VQ_SERVE and s.state == "open"
    ]
    planner = QuotaReclaim(settings=PlannerSettings(), guardrails=GuardrailSettings())
    assert planner.subject(signal, p.cluster.view) == POD
    return planner.plan(signal, p.cluster.view), signal


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_fewest_victims_of_the_same_queue_or_why_none(name: str) -> None:
    case = CASES[name]
    answer, signal = _planned(case)
    if case.no_fix is not None:
        assert isinstance(answer, NoFix), answer
        assert answer.planner == "quota_reclaim" and answer.code == case.no_fix
        return
    assert isinstance(answer, Plan), answer
    assert answer.kind == KIND and answer.signal == signal
    assert sorted(t.key for t in answer.evictions) == case.evicts
    assert answer.beneficiary == POD and answer.beneficiary_priority == case.priority
    assert [(t.key, node) for t, node in answer.lands] == [(POD, "gpu-1")]
    whatif = answer.evidence["whatif"]
    assert isinstance(whatif, dict) and isinstance(whatif["quota"], dict)
    quota = whatif["quota"]
    assert (whatif["placeable_before"], whatif["placeable_after"]) == (False, True)
    freed = sum(2 if k != "batch/four" else 4 for k in case.evicts)
    assert quota["used_after"] == case.serve[2] - freed
    assert quota["room_before"] == 0.0
    assert isinstance(quota["room_after"], float) and quota["room_after"] >= case.asks


def test_a_signal_of_another_scope_or_state_is_not_planned_for() -> None:
    case = CASES["fewest"]
    _, signal = _planned(case)
    p = define_pipeline(settings(mode="dry-run")).build()
    for env in minute_apart(case.steps()):
        feed(p, env)
    planner = QuotaReclaim(settings=PlannerSettings(), guardrails=GuardrailSettings())
    resolved = signal.model_copy(update={"state": "resolved"})
    assert planner.plan(resolved, p.cluster.view) is None
    other = signal.model_copy(update={"scope_id": "VolcanoQueue:elsewhere"})
    assert planner.plan(other, p.cluster.view) is None


def test_acting_routes_the_queue_signal_to_it_and_keeps_its_no_fix_on_the_pod() -> None:
    acting = Acting(planners=PlannerSettings(), guardrails=GuardrailSettings())
    (planner,) = acting.routes[SignalKind.QUOTA_EXHAUSTED]
    assert isinstance(planner, QuotaReclaim)
    case = CASES["nothing lower"]
    p = define_pipeline(settings(mode="dry-run")).build()
    signals: list[Signal] = []
    for env in minute_apart(case.steps()):
        signals += feed(p, env)
    queue = [s for s in signals if s.kind == SignalKind.QUOTA_EXHAUSTED]
    assert acting.on_signals(queue[0].opened_at, queue, p.cluster.view) == []
    # on the held pod's explanation, not on the queue's scope, which has none
    assert set(acting.no_fixes) == {POD}
    (reason,) = acting.no_fixes[POD]
    assert (reason.planner, reason.code) == ("quota_reclaim", "priority_gap")
