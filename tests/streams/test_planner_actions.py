"""Consolidation, quarantine and evict-aggressor plans, and the acting step that turns plans
into audit records and requests through the gate."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import replace
from datetime import timedelta

from models import (
    Action,
    ActionKind,
    ActionMode,
    ActionOutcome,
    Scope,
    Severity,
    Signal,
    SignalKind,
)
from models.actions import NoFix
from models.actuation import CordonNode, EvictPod, TaintNode, UncordonNode, UntaintNode
from models.settings import GuardrailSettings, PlannerSettings
from models.signals import fingerprint_of
from streams.planners.acting import Acting
from streams.planners.consolidate import Consolidate
from streams.planners.plan import Plan
from streams.planners.trial_capacity import Scratch
from tests.streams.planner_scenarios import (
    T0,
    PodSpec,
    build,
    health_signal,
    random_cluster,
    unplaceable,
)


def _consolidation_cluster(mover_priority: int = 0) -> list[PodSpec]:
    # a: one whole card and one half-used card; b: two half-used cards. 2.5 GPUs are free,
    # the 2-GPU job fits no node; moving s1 to b leaves a with two whole cards.
    return [
        PodSpec(name="s1", gpu_milli=500, priority=mover_priority, node="a", cards=(1,)),
        PodSpec(name="s2", gpu_milli=500, priority=50, node="b", cards=(0,)),
        PodSpec(name="s3", gpu_milli=500, priority=50, node="b", cards=(1,)),
        PodSpec(name="job", gpu_milli=1000, gpu_count=2, priority=10),
    ]


def test_a_small_pod_is_moved_so_that_a_two_gpu_job_fits_a_freed_node() -> None:
    p, signals = build({"a": 2, "b": 2}, _consolidation_cluster())
    signal = unplaceable(signals, "ml/job")
    assert signal is not None
    view = p.cluster.view
    plan = Consolidate(settings=PlannerSettings(), guardrails=GuardrailSettings()).plan(
        signal, view
    )
    assert isinstance(plan, Plan) and plan.kind is ActionKind.CONSOLIDATE
    assert [t.key for t in plan.evictions] == ["ml/s1"]
    assert plan.evidence["moves"] == {"ml/s1": "b"}
    assert plan.beneficiary_priority is None  # a move ends nobody's work: no priority gap
    # the proof redone: the job fits a once s1 is gone, and s1 fits b
    scratch = Scratch(view)
    a = scratch.room(view.index.slot["a"])
    assert a is not None
    s1 = view.tasks["ml/s1"]
    a.without([(s1, (1,))]).write(scratch.free)
    assert scratch.placeable(view.tasks["ml/job"])[view.index.slot["a"]]


def test_no_move_of_a_pod_above_the_jobs_priority() -> None:
    p, signals = build({"a": 2, "b": 2}, _consolidation_cluster(mover_priority=90))
    signal = unplaceable(signals, "ml/job")
    assert signal is not None
    plan = Consolidate(settings=PlannerSettings(), guardrails=GuardrailSettings()).plan(
        signal, p.cluster.view
    )
    # s1 is above the job's priority, s2 and s3 too: no pod may move, a shortage (no rule)
    assert isinstance(plan, NoFix) and not plan.guardrail
    assert plan.code == "no_candidates" and plan.nodes == 2


def _acting(mode: str, **limits: object) -> Acting:
    return Acting(
        planners=PlannerSettings(),
        guardrails=GuardrailSettings.model_validate({"mode": mode, **limits}),
    )


def test_dry_run_records_proposals_and_hands_nothing_to_the_actuator() -> None:
    p, signals = build({"a": 2, "b": 2}, _consolidation_cluster())
    out = _acting("dry-run").on_signals(T0, signals, p.cluster.view)
    assert [type(o) for o in out] == [Action]
    (record,) = out
    assert isinstance(record, Action)
    assert record.mode is ActionMode.DRY_RUN and record.outcome is ActionOutcome.PROPOSED
    assert record.kind is ActionKind.CONSOLIDATE and record.target == "ml/s1"
    assert record.evidence["moves"] == {"ml/s1": "b"}


def test_enforce_hands_the_eviction_on_and_a_limit_leaves_nothing_to_propose() -> None:
    p, signals = build({"a": 2, "b": 2}, _consolidation_cluster())
    out = _acting("enforce").on_signals(T0, signals, p.cluster.view)
    records = [o for o in out if isinstance(o, Action)]
    requests = [o for o in out if isinstance(o, EvictPod)]
    assert [r.outcome for r in records] == [ActionOutcome.PROPOSED]
    assert [(r.namespace, r.name, r.mode) for r in requests] == [("ml", "s1", ActionMode.ENFORCE)]
    assert requests[0].id == records[0].id

    # the planners ask the gate first: a node whose limit is used up offers no victim; the
    # plan that limit holds back is searched with the limits lifted and recorded refused,
    # with its proof, and nothing reaches the actuator (a planner that does not ask, the
    # aggressor's, is refused whole too, below)
    limited = _acting("enforce", max_evictions_node=0)
    (held,) = limited.on_signals(T0, signals, p.cluster.view)
    assert isinstance(held, Action) and held.outcome is ActionOutcome.REFUSED
    assert (held.kind, held.target, held.evidence["refused_rule"]) == (
        "consolidate",
        "ml/s1",
        "rate_limited",
    )
    assert held.evidence["whatif"] == records[0].evidence["whatif"]
    assert limited.held_back == 1 and limited.no_fixes == {}
    storm = _storm("ml/s1", ["ml/s2", "ml/s3"])
    refused = limited.on_signals(T0, [storm], p.cluster.view)
    assert [type(o) for o in refused] == [Action]
    assert isinstance(refused[0], Action) and refused[0].outcome is ActionOutcome.REFUSED
    assert "node:a had 0 evictions in 600 s already" in str(refused[0].evidence["refused"])

    # with the cluster's limit used up no plan is searched for at all, and it is counted
    spent = _acting("enforce", max_evictions_cluster=0)
    assert spent.on_signals(T0, signals, p.cluster.view) == []
    assert spent.unplanned == 1


def test_quarantine_cordons_and_taints_and_lifts_when_the_card_recovers() -> None:
    p, _ = build({"a": 2, "b": 2}, _consolidation_cluster())
    acting = _acting("enforce")
    opened = acting.on_signals(T0, [health_signal("open")], p.cluster.view)
    ops = [type(o) for o in opened if not isinstance(o, Action)]
    assert ops == [CordonNode, TaintNode]
    records = [o for o in opened if isinstance(o, Action)]
    assert {r.kind for r in records} == {ActionKind.QUARANTINE}
    assert records[0].evidence["pods_on_faulty_gpu"] == ["ml/s1"]
    # a second card of the same node failing adds nothing; the node is lifted after both
    assert acting.on_signals(T0, [health_signal("open", card=1)], p.cluster.view) == []
    assert acting.on_signals(T0, [health_signal("resolved")], p.cluster.view) == []
    later = T0 + timedelta(minutes=6)
    lifted = acting.on_signals(later, [health_signal("resolved", card=1)], p.cluster.view)
    assert [type(o) for o in lifted if not isinstance(o, Action)] == [UntaintNode, UncordonNode]


def _storm(aggressor: str, victims: list[str]) -> Signal:
    return Signal(
        kind=SignalKind.OOM_STORM,
        scope=Scope.GPU,
        scope_id="b/0",
        fingerprint=fingerprint_of(SignalKind.OOM_STORM, Scope.GPU, "b/0"),
        severity=Severity.CRITICAL,
        summary="OOM storm",
        evidence={"aggressor": aggressor, "victims": victims},
        opened_at=T0,
    )


def test_an_aggressor_below_its_victims_is_evicted_and_one_above_them_is_not() -> None:
    p, _ = build({"a": 2, "b": 2}, _consolidation_cluster())
    view = p.cluster.view
    low = _acting("enforce").on_signals(T0, [_storm("ml/s1", ["ml/s2", "ml/s3"])], view)
    evictions = [o for o in low if isinstance(o, EvictPod)]
    assert [e.target for e in evictions] == ["ml/s1"]
    assert evictions[0].kind is ActionKind.EVICT_AGGRESSOR
    high = _acting("enforce").on_signals(T0, [_storm("ml/s2", ["ml/s1"])], view)
    assert high == []


def test_random_clusters_never_evict_protected_or_exempt_pods_nor_pass_the_limits() -> None:
    """Several pending pods at once on random small clusters, some pods in protected
    namespaces or carrying the exempt label: what the acting step hands the actuator never
    touches them, never exceeds the eviction limits, and in dry-run is nothing at all."""
    rng = random.Random(7)
    handed = 0
    for _ in range(250):
        nodes, pods = random_cluster(rng)
        pods = [
            replace(p, namespace=rng.choice(["ml", "ml", "kube-system", "gpu-operator", "team"]))
            for p in pods
        ]
        wanted = [
            PodSpec(name=f"want{i}", gpu_milli=1000, priority=10, namespace="ml")
            for i in range(rng.randint(1, 3))
        ]
        p, signals = build(nodes, [*pods, *wanted])
        limits = {"max_evictions_cluster": 3, "max_evictions_node": 1, "max_evictions_namespace": 2}
        for mode in ("enforce", "dry-run"):
            out = _acting(mode, **limits).on_signals(T0, signals, p.cluster.view)
            evictions = [o for o in out if isinstance(o, EvictPod)]
            if mode == "dry-run":
                assert evictions == []
                assert all(o.mode is ActionMode.DRY_RUN for o in out if isinstance(o, Action))
                continue
            handed += len(evictions)
            by = {spec.key: spec for spec in pods}
            for e in evictions:
                victim = by[e.target]
                assert victim.namespace not in ("kube-system", "gpu-operator")
                assert not victim.labels
            assert len(evictions) <= 3
            assert max(Counter(by[e.target].node for e in evictions).values(), default=0) <= 1
            assert max(Counter(by[e.target].namespace for e in evictions).values(), default=0) <= 2
    assert handed >= 20  # the property was exercised, not vacuous
