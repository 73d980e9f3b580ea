"""The extender's decisions on a cluster view (issue 28): filter by the cards' own room, FGD
scores mapped to kube-scheduler's 0..10, cards chosen by the same score, back-to-back binds
charged through the assume cache, preemption under the guardrails. Figures worked by hand."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from models import AnalysisSettings, Node, PodPhase, ResourceRequest, TaskProfile
from models.cards import SharingMode
from models.settings import GuardrailSettings
from streams.cluster.view import ClusterView
from streams.extender.assumed import AssumeCache
from streams.extender.scores import MAX_EXTENDER_SCORE, extender_range, make_scorer
from streams.extender.verbs import BindChoice, Extender
from streams.fragmentation.shapes import PodShape, TypicalPod, TypicalPods
from streams.profiles.join import node_profile

T0 = datetime(2026, 12, 7, tzinfo=UTC)


def share(milli: int, *, cpu: int = 1_000) -> ResourceRequest:
    """A HAMi share: cores and memory both ``milli``/10 percent of one card."""
    return ResourceRequest(
        cpu_milli=cpu,
        memory_mib=1_024,
        gpu_count=1,
        gpu_milli=milli,
        gpu_cores_pct=milli // 10,
        gpu_memory_pct=milli // 10,
    )


def cards(n: int) -> ResourceRequest:
    return ResourceRequest(
        cpu_milli=1_000, memory_mib=1_024, gpu_count=n, gpu_milli=1000, gpu_cores_pct=100
    )


def hami(name: str, *, gpus: int = 2, model: str = "T4") -> Node:
    return Node(
        name=name,
        cpu_milli=32_000,
        memory_mib=131_072,
        gpu_model=model,
        gpu_count=gpus,
        gpu_memory_mib=16_384,
        gpu_replicas=100,
        gpu_sharing=SharingMode.HAMI,
    )


def task(
    key: str, request: ResourceRequest, *, node: str | None = None, **kw: object
) -> TaskProfile:
    return TaskProfile(
        key=key,
        uid=f"uid-{key}",
        requests=request,
        phase=PodPhase.RUNNING if node else PodPhase.PENDING,
        node=node,
        created_at=T0,
        **kw,  # type: ignore[arg-type]
    )


SEVENTY = TypicalPods(
    pods=(TypicalPod(PodShape(1_000, 700, 1, hami=True, cores_milli=700, gpu_memory_pct=70), 1.0),),
    coverage=1.0,
    observed_pods=1,
)
"""Every expected pod takes 70 % of a card: a card with less than 700 free is fragment."""


def view_of(
    nodes: list[tuple[Node, list[TaskProfile]]], typical: TypicalPods = SEVENTY
) -> ClusterView:
    view = ClusterView(settings=AnalysisSettings(), typical=typical)
    for node, tasks in nodes:
        for t in tasks:
            view.put_task(t.key, t)
        view.put_node(node.name, node_profile(node, tasks, {}, at=T0))
    return view


def extender() -> Extender:
    return Extender(scorer=make_scorer("fgd", seed=0), assumed=AssumeCache(ttl_s=60))


def test_fgd_scores_the_exact_fit_10_and_the_fresh_card_0() -> None:
    # a: card 0 has 300 taken (700 free), card 1 free; b: both free. A 700 share on a's card 0
    # leaves [0, 1000]: no fragment (growth 0). On b it leaves [300, 1000]: the 300 is too
    # small for a 700 pod, so fragment grows by 300. a is best (10), b the worst (0).
    a, b = hami("a"), hami("b")
    view = view_of([(a, [task("ns/x", share(300), node="a")]), (b, [])])
    ext, pod = extender(), task("ns/p", share(700))
    assert ext.prioritize(view, pod, ["a", "b"]) == [("a", 10), ("b", 0)]
    assert ext.choose_cards(view, pod, "a") == BindChoice("a", (0,))
    # on b the two cards are alike: the lower index
    assert ext.choose_cards(view, pod, "b") == BindChoice("b", (0,))


def test_back_to_back_binds_never_hand_out_one_card_twice() -> None:
    # the view never sees the binds (kube-scheduler goes on at once): the assume cache does
    a = hami("a")
    view = view_of([(a, [])])
    ext = extender()
    taken = []
    for k in range(2):
        pod = task(f"ns/p{k}", share(700))
        assert ext.filter(view, pod, ["a"]).passed == ("a",)
        choice = ext.choose_cards(view, pod, "a")
        ext.assume(pod, choice, now_s=float(k))
        taken.append(choice.cards)
    assert sorted(taken) == [(0,), (1,)]
    # a third 700 share finds 300 on each card, 600 in all: the filter says why, in gpufrag's
    # words (short of cards: even joined, the free GPU would not be enough)
    third = task("ns/p2", share(700))
    out = ext.filter(view, third, ["a"])
    assert out.passed == () and out.failed == {"a": "gpufrag: gpu_count (too few cards with room)"}
    with pytest.raises(ValueError, match="no room"):
        ext.choose_cards(view, third, "a")


def test_an_assumption_ends_when_the_view_shows_the_pod_bound_or_after_its_ttl() -> None:
    a = hami("a")
    pod = task("ns/p", share(700))
    view = view_of([(a, [])])
    assumed = AssumeCache(ttl_s=30)
    ext = Extender(scorer=make_scorer("fgd", seed=0), assumed=assumed)
    ext.assume(pod, ext.choose_cards(view, pod, "a"), now_s=0.0)
    assumed.settle(view, 10.0)
    assert "ns/p" in assumed
    bound_view = view_of([(a, [task("ns/p", share(700), node="a")])])
    assumed.settle(bound_view, 11.0)
    assert "ns/p" not in assumed and assumed.expired == 0
    other = task("ns/q", share(700))
    ext.assume(other, BindChoice("a", (1,)), now_s=20.0)
    assumed.settle(view, 50.5)  # 30.5 s unseen: the bind is taken as failed
    assert len(assumed) == 0 and assumed.expired == 1


def test_whole_cards_count_and_model_reasons_say_which_nodes_preemption_can_help() -> None:
    a, t = hami("a"), hami("t", model="A10")
    view = view_of([(a, [task("ns/x", share(300), node="a")]), (t, [])])
    pod = task("ns/p", cards(2), gpu_models=("T4",))
    out = extender().filter(view, pod, ["a", "t", "unknown-node"])
    # a has one whole card free and 1,700 milli in all: short of cards, not split
    assert out.failed == {"a": "gpufrag: gpu_count (too few cards with room)"}
    assert out.unresolvable == {
        "t": "gpufrag: gpu_model (no card of the GPU model the pod asks for)"
    }
    assert out.passed == ("unknown-node",) and out.unknown == 1


def test_a_pod_without_gpus_passes_every_node_and_unknown_nodes_score_0() -> None:
    view = view_of([(hami("a"), [])])
    ext = extender()
    cpu_only = task("ns/c", ResourceRequest(cpu_milli=500, memory_mib=256))
    assert ext.filter(view, cpu_only, ["a", "z"]).passed == ("a", "z")
    assert ext.prioritize(view, task("ns/p", share(700)), ["z", "a"]) == [("z", 0), ("a", 10)]


@pytest.mark.parametrize(
    ("raw", "scores"),
    [
        ([], []),
        ([5.0], [MAX_EXTENDER_SCORE]),
        ([2.0, 2.0], [10, 10]),
        ([-300.0, 0.0, -150.0], [0, 10, 4]),
        ([0.0, float("-inf")], [10, 0]),
        ([float("-inf")], [0]),
        ([1.0, 0.999], [10, 0]),
    ],
)
def test_raw_scores_map_to_0_10_with_only_the_best_at_10(
    raw: list[float], scores: list[int]
) -> None:
    assert extender_range(raw) == scores


@pytest.mark.parametrize(
    "name", ["random", "dot-product", "gpu-clustering", "gpu-packing", "best-fit", "fgd"]
)
def test_every_placement_policy_scores_the_live_view(name: str) -> None:
    view = view_of([(hami("a"), [task("ns/x", share(300), node="a")]), (hami("b"), [])])
    ext = Extender(scorer=make_scorer(name, seed=3), assumed=AssumeCache(ttl_s=60))
    scores = dict(ext.prioritize(view, task("ns/p", share(700)), ["a", "b"]))
    assert set(scores) == {"a", "b"} and all(0 <= s <= 10 for s in scores.values())
    if name in ("fgd", "gpu-packing", "best-fit"):
        assert scores["a"] > scores["b"]  # each packs onto the used card


def test_an_unknown_policy_names_the_six() -> None:
    with pytest.raises(
        ValueError, match="random, dot-product, gpu-clustering, gpu-packing, best-fit, fgd"
    ):
        make_scorer("tetris", seed=0)


def test_preemption_drops_nodes_whose_victims_the_guardrails_protect() -> None:
    a, b = hami("a"), hami("b")
    sys_pod = task("kube-system/dns", cards(1), node="a")
    low = task("team/low", cards(1), node="b")
    view = view_of([(a, [sys_pod]), (b, [low])])
    pod = task("team/high", cards(2), priority=1000)
    kept = extender().preempt(
        view,
        pod,
        {"a": ([sys_pod.uid], 0), "b": ([low.uid], 0), "c": (["uid-unseen"], 0)},
        guardrails=GuardrailSettings(),
    )
    # a: kube-system is protected; c: a victim this view never saw; b stays as proposed
    assert [(v.node, v.uids) for v in kept] == [("b", (low.uid,))]


def exclusive(name: str, *, gpus: int) -> Node:
    return Node(
        name=name,
        cpu_milli=32_000,
        memory_mib=131_072,
        gpu_model="H100",
        gpu_count=gpus,
        gpu_sharing=SharingMode.EXCLUSIVE,
    )


ONE_CARD = TypicalPods(
    pods=(TypicalPod(PodShape(1_000, 1_000, 1), 1.0),), coverage=1.0, observed_pods=1
)


def test_preemption_keeps_back_the_victims_the_pod_does_not_need_and_picks_the_tighter_node() -> (
    None
):
    # a: 2 cards, both held (priorities 0 and 5); b: 4 cards, all held at priority 0. The pod
    # needs one card. On a, evicting the priority-0 pod alone makes room: the priority-5 one
    # stays. On b one eviction is enough as well, and leaves 1 card free after the pod: no
    # fragment under one-card typical pods; on a nothing is left. Both leave 0 fragment, and a
    # (listed first by name among equals, one victim each) is the answer.
    a, b = exclusive("a", gpus=2), exclusive("b", gpus=4)
    low_a = task("team/low-a", cards(1), node="a")
    mid_a = task("team/mid-a", cards(1), node="a", priority=5)
    on_b = [task(f"team/b{k}", cards(1), node="b") for k in range(4)]
    view = view_of([(a, [low_a, mid_a]), (b, on_b)], typical=ONE_CARD)
    pod = task("team/high", cards(1), priority=1000)
    kept = extender().preempt(
        view,
        pod,
        {"a": ([low_a.uid, mid_a.uid], 0), "b": ([t.uid for t in on_b], 1)},
        guardrails=GuardrailSettings(),
    )
    assert [(v.node, v.uids) for v in kept] == [("a", (low_a.uid,))]


def test_preemption_weighs_the_fragment_each_set_of_victims_leaves() -> None:
    # a two-card pod, two-card typical pods. a: 4 cards, a two-card pod v on 0-1, a one-card
    # pod w on 2, card 3 free. Evicting w frees 2 and 3: the pod takes both, nothing is left,
    # no fragment. Evicting v frees 0 and 1: the pod takes two of 0, 1, 3 and one card is left
    # alone, a fragment of 1,000 for two-card pods. b: 2 cards, both held: evicting both
    # leaves no fragment either, but two pods. So a, with w alone.
    two = TypicalPods(
        pods=(TypicalPod(PodShape(1_000, 1_000, 2), 1.0),), coverage=1.0, observed_pods=1
    )
    a, b = exclusive("a", gpus=4), exclusive("b", gpus=2)
    v = task("team/v", cards(2), node="a")
    w = task("team/w", cards(1), node="a")
    on_b = [task(f"team/b{k}", cards(1), node="b") for k in range(2)]
    view = view_of([(a, [v, w]), (b, on_b)], typical=two)
    pod = task("team/high", cards(2), priority=1000)
    kept = extender().preempt(
        view,
        pod,
        {"b": ([t.uid for t in on_b], 0), "a": ([v.uid, w.uid], 0)},
        guardrails=GuardrailSettings(),
    )
    assert [(k.node, k.uids) for k in kept] == [("a", (w.uid,))]


def test_preemption_prefers_fewer_disruption_budget_violations_over_less_fragment() -> None:
    # as above, but evicting on a would break a PodDisruptionBudget (the scheduler counted
    # it): b, with none, is the answer though it leaves the same fragment with two victims
    two = TypicalPods(
        pods=(TypicalPod(PodShape(1_000, 1_000, 2), 1.0),), coverage=1.0, observed_pods=1
    )
    a, b = exclusive("a", gpus=4), exclusive("b", gpus=2)
    v, w = task("team/v", cards(2), node="a"), task("team/w", cards(1), node="a")
    on_b = [task(f"team/b{k}", cards(1), node="b") for k in range(2)]
    view = view_of([(a, [v, w]), (b, on_b)], typical=two)
    kept = extender().preempt(
        view,
        task("team/high", cards(2), priority=1000),
        {"a": ([v.uid, w.uid], 1), "b": ([t.uid for t in on_b], 0)},
        guardrails=GuardrailSettings(),
    )
    assert [(k.node, len(k.uids), k.pdb_violations) for k in kept] == [("b", 2, 0)]


def test_other_policies_leave_the_card_to_the_device_plugins_tightest() -> None:
    # a: card 0 has 300 taken (700 free), card 1 free; a 200 share: fgd weighs both cards, a
    # score-only policy takes the tightest card with room, card 0, like the device plugin
    view = view_of([(hami("a"), [task("ns/x", share(300), node="a")])])
    pod = task("ns/p", share(200))
    best_fit = Extender(scorer=make_scorer("best-fit", seed=0), assumed=AssumeCache(ttl_s=60))
    assert best_fit.choose_cards(view, pod, "a") == BindChoice("a", (0,))
    full = task("ns/q", share(800))  # fits card 1 only
    assert best_fit.choose_cards(view, full, "a") == BindChoice("a", (1,))
    assert extender().choose_cards(view, full, "a") == BindChoice("a", (1,))
