"""Plans the gate would admit, and a dry run that rehearses enforce: the searching planners ask
the gate (cooldowns and rates included) before they propose, pass over a victim set it would
refuse for the next one, and in dry-run count each admitted plan as done for the cooldown."""

from __future__ import annotations

from datetime import timedelta

import pytest

from models import Action, ActionOutcome
from models.actuation import EvictPod
from models.settings import GuardrailSettings, PlannerSettings
from streams.cluster.view import ClusterView
from streams.planners.acting import Acting
from streams.planners.search import MAX_REFUSED_SETS
from tests.streams.planner_scenarios import T0, PodSpec, build, unplaceable


def _acting(mode: str, **limits: object) -> Acting:
    return Acting(
        planners=PlannerSettings(),
        guardrails=GuardrailSettings.model_validate({"mode": mode, **limits}),
    )


def _admitted(out: list[object]) -> list[Action]:
    return [o for o in out if isinstance(o, Action) and o.outcome is ActionOutcome.PROPOSED]


# --- a refused set is passed over for the next one -------------------------------------------


def _halves(node: str, cards: int) -> list[PodSpec]:
    """Half of each card of ``node`` held by a pod too high to be a victim (priority 50), so
    the cluster has free GPU, split: a pending whole-card pod is unplaceable, not just
    waiting for a full cluster."""
    return [
        PodSpec(name=f"h-{node}{c}", gpu_milli=500, priority=50, node=node, cards=(c,))
        for c in range(cards)
    ]


def _two_nodes_full() -> list[PodSpec]:
    # a: x1, x2 (priority 0, namespace ml); b: y1 (ml), y2 (team), priority 1; c: four half
    # cards free. The 2-GPU job needs a whole node: {x1, x2} is the cheapest set (lowest
    # priority), {y1, y2} the next.
    return [
        *_halves("c", 4),
        PodSpec(name="x1", gpu_milli=1000, priority=0, node="a", cards=(0,)),
        PodSpec(name="x2", gpu_milli=1000, priority=0, node="a", cards=(1,)),
        PodSpec(name="y1", gpu_milli=1000, priority=1, node="b", cards=(0,)),
        PodSpec(name="y2", gpu_milli=1000, priority=1, node="b", cards=(1,), namespace="team"),
        PodSpec(name="job", gpu_milli=1000, gpu_count=2, priority=10),
    ]


@pytest.mark.parametrize(
    ("limits", "victims", "refused_sets"),
    [
        # no limit in the way: the cheapest set
        ({}, ["ml/x1", "ml/x2"], 0),
        # one eviction per namespace: x1 and x2 each pass alone, not together; y1 and y2
        # are in two namespaces
        ({"max_evictions_namespace": 1}, ["ml/y1", "team/y2"], 1),
        # one per node: every 2-pod set here is on one node, so nothing is proposed (the
        # cheapest set is recorded refused, as the plan the limit holds back)
        ({"max_evictions_node": 1}, [], 2),
    ],
)
def test_a_set_the_gate_refuses_is_passed_over_for_the_next(
    limits: dict[str, object], victims: list[str], refused_sets: int
) -> None:
    p, signals = build({"a": 2, "b": 2, "c": 4}, _two_nodes_full())
    acting = _acting("enforce", **limits)
    out = acting.on_signals(T0, signals, p.cluster.view)
    assert sorted(o.target for o in out if isinstance(o, EvictPod)) == victims
    records = _admitted(out)
    if victims:
        assert all(o.outcome is ActionOutcome.PROPOSED for o in out if isinstance(o, Action))
        assert records[0].evidence.get("gate_refused_sets", 0) == refused_sets
    else:
        assert records == []
        held = [o for o in out if isinstance(o, Action)]
        assert sorted(o.target for o in held) == ["ml/x1", "ml/x2"]
        assert {o.evidence["refused_rule"] for o in held} == {"rate_limited"}


@pytest.mark.parametrize(
    ("refused_nodes", "victims"),
    [(MAX_REFUSED_SETS - 1, ["t1/z0", "t2/z1"]), (MAX_REFUSED_SETS, [])],
)
def test_the_sets_a_search_passes_over_are_bounded(refused_nodes: int, victims: list[str]) -> None:
    """Nodes n0.. hold two priority-0 pods of one namespace each, node z two priority-1
    pods of two namespaces; one eviction per namespace. Every n-node's set is cheaper and
    refused; z's comes after them, so it is proposed only while the refusals stay within
    ``MAX_REFUSED_SETS``."""
    nodes = {f"n{i}": 2 for i in range(refused_nodes)} | {"z": 2, "c": 4}
    pods = (
        [
            PodSpec(name=f"{n}-{c}", gpu_milli=1000, node=n, cards=(c,))
            for n in sorted(nodes)
            if n not in ("z", "c")
            for c in (0, 1)
        ]
        + _halves("c", 4)
        + [
            PodSpec(
                name=f"z{c}",
                gpu_milli=1000,
                priority=1,
                node="z",
                cards=(c,),
                namespace=f"t{c + 1}",
            )
            for c in (0, 1)
        ]
    )
    job = PodSpec(name="job", gpu_milli=1000, gpu_count=2, priority=9)
    p, signals = build(nodes, [*pods, job])
    out = _acting("enforce", max_evictions_namespace=1).on_signals(T0, signals, p.cluster.view)
    assert sorted(o.target for o in out if isinstance(o, EvictPod)) == victims
    if victims:
        assert _admitted(out)[0].evidence["gate_refused_sets"] == refused_nodes


# --- a dry run does not choose a victim again inside its cooldown -----------------------------


def _one_card_each() -> list[PodSpec]:
    # a: x (priority 0) on card 0; b: y (priority 1) on card 0; half of each card 1 free;
    # two 1-GPU pods of priority 10 wait. Reclaim takes x first (the lowest priority), then
    # must take y: x is gone and p1 holds its card.
    return [
        *_halves("a", 2)[1:],
        *_halves("b", 2)[1:],
        PodSpec(name="x", gpu_milli=1000, priority=0, node="a", cards=(0,)),
        PodSpec(name="y", gpu_milli=1000, priority=1, node="b", cards=(0,)),
        PodSpec(name="p1", gpu_milli=1000, priority=10),
        PodSpec(name="p2", gpu_milli=1000, priority=10),
    ]


def _two_instants(mode: str, gap_s: float) -> tuple[Acting, list[Action], list[Action]]:
    p, signals = build({"a": 2, "b": 2}, _one_card_each())
    s1, s2 = unplaceable(signals, "ml/p1"), unplaceable(signals, "ml/p2")
    assert s1 is not None and s2 is not None
    view: ClusterView = p.cluster.view  # never changes: nothing is carried out here
    acting = _acting(mode)
    first = acting.on_signals(T0, [s1], view)
    second = acting.on_signals(T0 + timedelta(seconds=gap_s), [s2], view)
    return acting, _records(first), _records(second)


def _records(out: list[object]) -> list[Action]:
    return [o for o in out if isinstance(o, Action)]


@pytest.mark.parametrize(
    ("mode", "gap_s", "second"),
    [
        # inside x's cooldown (3,600 s): y, proposed; before, x again and refused
        ("dry-run", 60, ("ml/y", ActionOutcome.PROPOSED)),
        ("dry-run", 3_599, ("ml/y", ActionOutcome.PROPOSED)),
        # the window over: the dry run forgets its plan, x is a candidate again
        ("dry-run", 3_601, ("ml/x", ActionOutcome.PROPOSED)),
        # enforce, the actuator not yet done: the gate's cooldown alone keeps x out
        ("enforce", 60, ("ml/y", ActionOutcome.PROPOSED)),
    ],
)
def test_a_victim_inside_its_cooldown_is_not_chosen_again(
    mode: str, gap_s: float, second: tuple[str, ActionOutcome]
) -> None:
    _, first, then = _two_instants(mode, gap_s)
    assert [(r.target, r.outcome) for r in first] == [("ml/x", ActionOutcome.PROPOSED)]
    assert [(r.target, r.outcome) for r in then] == [second]


def test_a_dry_run_counts_the_freed_card_as_taken_by_the_pod_it_was_freed_for() -> None:
    """Were x's card only freed, p2 would fit it and nothing would be planned; enforce would
    have put p1 there, so p2's plan must take y."""
    acting, _, then = _two_instants("dry-run", 60)
    assert [r.target for r in then] == ["ml/y"]
    assert then[0].evidence["whatif"] == {
        "placeable_before": False,
        "placeable_after": True,
        "placed": {"ml/p2": "b"},
    }
    # both plans rehearsed, for the pod cooldown
    assert [e.until - T0 for e in acting.rehearsal.entries] == [
        timedelta(seconds=3_600),
        timedelta(seconds=3_660),
    ]


def test_a_pending_pod_a_rehearsed_plan_placed_is_not_planned_for_again() -> None:
    p, signals = build({"a": 2, "b": 2}, _one_card_each())
    s1 = unplaceable(signals, "ml/p1")
    assert s1 is not None
    acting = _acting("dry-run")
    assert len(_admitted(acting.on_signals(T0, [s1], p.cluster.view))) == 1
    assert acting.on_signals(T0 + timedelta(seconds=30), [s1], p.cluster.view) == []


def test_the_rehearsal_survives_a_restart_and_enforce_rehearses_nothing() -> None:
    acting, _, _ = _two_instants("dry-run", 60)
    again = _acting("dry-run")
    again.restore(acting.snapshot())
    assert again.rehearsal.entries == acting.rehearsal.entries
    enforce, _, _ = _two_instants("enforce", 60)
    assert enforce.rehearsal.entries == []
    assert "rehearsal" not in enforce.snapshot()


def test_a_dry_run_counts_the_victims_room_as_freed() -> None:
    """x frees a whole card and p1 takes half of it: enforce would then place p2 on the other
    half without evicting anyone, so the dry run plans nothing for p2 (with the gate's
    cooldown alone it would evict y; before either, it chose x again, refused)."""
    pods = [
        *[
            PodSpec(name=f"h-{n}", gpu_milli=750, priority=50, node=n, cards=(1,))
            for n in ("a", "b")
        ],
        PodSpec(name="x", gpu_milli=1000, priority=0, node="a", cards=(0,)),
        PodSpec(name="y", gpu_milli=1000, priority=1, node="b", cards=(0,)),
        PodSpec(name="p1", gpu_milli=500, priority=10),
        PodSpec(name="p2", gpu_milli=500, priority=10),
    ]
    p, signals = build({"a": 2, "b": 2}, pods)
    s1, s2 = unplaceable(signals, "ml/p1"), unplaceable(signals, "ml/p2")
    assert s1 is not None and s2 is not None
    acting = _acting("dry-run")
    first = acting.on_signals(T0, [s1], p.cluster.view)
    assert [r.target for r in _admitted(first)] == ["ml/x"]
    assert acting.on_signals(T0 + timedelta(seconds=60), [s2], p.cluster.view) == []
