"""Reclaim plans: the pending pod is placeable after the plan and was not before, and no plan
evicts more pods than the least any subset needs (a brute force over small clusters)."""

from __future__ import annotations

import random

from models import ActionKind
from models.actions import NoFix
from models.settings import GuardrailSettings, PlannerSettings
from streams.planners.plan import Plan
from streams.planners.reclaim import Reclaim
from streams.planners.trial_capacity import Scratch
from tests.streams.planner_scenarios import (
    PodSpec,
    build,
    fewest_victims,
    random_cluster,
    unplaceable,
)

TARGET_PRIORITY = 10


def _reclaim() -> Reclaim:
    return Reclaim(settings=PlannerSettings(max_victims=4), guardrails=GuardrailSettings())


def test_one_low_priority_pod_is_evicted_for_a_whole_card() -> None:
    # two nodes, each with one card half taken: 1 GPU is free in total, on no single card
    nodes = {"a": 1, "b": 1}
    pods = [
        PodSpec(name="low", gpu_milli=500, priority=1, node="a", cards=(0,)),
        PodSpec(name="high", gpu_milli=500, priority=20, node="b", cards=(0,)),
        PodSpec(name="want", gpu_milli=1000, priority=TARGET_PRIORITY),
    ]
    p, signals = build(nodes, pods)
    signal = unplaceable(signals, "ml/want")
    assert signal is not None
    plan = _reclaim().plan(signal, p.cluster.view)
    assert isinstance(plan, Plan) and plan.kind is ActionKind.RECLAIM
    assert [t.key for t in plan.evictions] == ["ml/low"]  # never the higher-priority one
    assert plan.evidence["whatif"] == {
        "placeable_before": False,
        "placeable_after": True,
        "placed": {"ml/want": "a"},
    }


def test_nothing_to_evict_below_the_priority_gap_gives_no_plan() -> None:
    nodes = {"a": 1}
    pods = [
        PodSpec(name="peer", gpu_milli=500, priority=TARGET_PRIORITY, node="a", cards=(0,)),
        PodSpec(name="want", gpu_milli=1000, priority=TARGET_PRIORITY),
        PodSpec(name="cpu", gpu_milli=0, gpu_count=0, node="a"),
    ]
    p, signals = build(
        {**nodes, "b": 1},
        [*pods, PodSpec(name="x", gpu_milli=500, priority=30, node="b", cards=(0,))],
    )
    signal = unplaceable(signals, "ml/want")
    assert signal is not None
    no_fix = _reclaim().plan(signal, p.cluster.view)
    # no plan, and why: the gate's priority gap turns away both GPU pods; the CPU-only pod
    # it allows frees no GPU
    assert isinstance(no_fix, NoFix) and no_fix.guardrail
    assert (no_fix.code, no_fix.pods, no_fix.nodes) == ("priority_gap", 2, 2)
    assert "2 with a priority less than 1 below the pending pod's (10)" in no_fix.text


def test_plans_are_minimal_and_proven_on_random_small_clusters() -> None:
    rng = random.Random(20261202)
    checked = with_plan = 0
    for _ in range(400):
        nodes, pods = random_cluster(rng)
        count = rng.choice([1, 1, 2])
        share = 1000 if count == 2 else rng.choice([750, 1000])
        target = PodSpec(name="want", gpu_milli=share, gpu_count=count, priority=TARGET_PRIORITY)
        p, signals = build(nodes, [*pods, target])
        signal = unplaceable(signals, target.key)
        if signal is None:
            continue  # it fits, or the free total is short: not an unplaceable pod
        checked += 1
        eligible = [
            x for x in pods if x.priority <= TARGET_PRIORITY - 1 and not x.labels
        ]  # the exempt ones never
        least = fewest_victims(nodes, pods, target, eligible, most=4)
        view = p.cluster.view
        plan = _reclaim().plan(signal, view)
        if least is None:
            assert isinstance(plan, NoFix), plan  # no plan, and a reason for it
            continue
        assert isinstance(plan, Plan), (nodes, pods, plan)
        with_plan += 1
        assert len(plan.evictions) == least, (nodes, pods, [t.key for t in plan.evictions])
        # the proof, redone on a fresh copy: not placeable before, placeable after
        before = Scratch(view)
        task = view.tasks[target.key]
        assert not before.placeable(task).any()
        after = Scratch(view)
        for victim in plan.evictions:
            room = after.room(view.index.slot[victim.node or ""])
            assert room is not None
            cards = tuple(
                g.index for g in view.nodes[victim.node or ""].gpus if victim.key in g.pods
            )
            room.without([(victim, cards)]).write(after.free)
        assert after.placeable(task).any()
    assert checked >= 30 and with_plan >= 15, (checked, with_plan)
