"""The OOM-storm detector on the issue's scripted incident, as a scenario table: one aggressor on
a time-sliced card whose memory grows, four victims OOM-killed within a minute, and unrelated
OOMs on another node that stay below the thresholds (card: 3 in 60 s; node: 5 in 120 s;
namespace: 10 in 300 s; quiet period 300 s)."""

from __future__ import annotations

from datetime import datetime

from models import (
    GpuState,
    NodeProfile,
    PodPhase,
    ResourceRequest,
    Signal,
    TaskProfile,
)
from models.cards import SharingMode
from streams.cluster_analysis import ClusterAnalysis
from streams.fragmentation.shapes import TypicalPods
from streams.profiles.join import NodeProfileUpdate, ProfileUpdate, TaskProfileUpdate
from tests.streams.profiles_helpers import T0, at, only_detector

ONLY_STORMS = only_detector("oom_storm")
AGGRESSOR = "notebooks/greedy"
VICTIMS = [f"serving/v{i}" for i in range(1, 5)]
ON_CARD = (AGGRESSOR, *VICTIMS)


def task(key: str, t: float, *, node: str, ooms: int = 0) -> TaskProfileUpdate:
    profile = TaskProfile(
        key=key,
        uid=key,
        requests=ResourceRequest(cpu_milli=500, memory_mib=512, gpu_count=1, gpu_milli=1000),
        phase=PodPhase.RUNNING,
        node=node,
        created_at=T0,
        oom_count=ooms,
    )
    return TaskProfileUpdate(key, profile, at(t))


def card_node(t: float, greedy_mib: float) -> NodeProfileUpdate:
    figures = {AGGRESSOR: greedy_mib, **{v: 1_000.0 for v in VICTIMS}}
    card = GpuState(
        index=0,
        milli_free=0,
        mode=SharingMode.TIME_SLICED,
        units=8,
        units_free=3,
        pods=tuple(sorted(ON_CARD)),
        pod_memory_mib=figures,
        memory_total_mib=81_920.0,
        memory_used_mib=sum(figures.values()),
    )
    return NodeProfileUpdate("ts-0", _profile("ts-0", card, ON_CARD, t), at(t))


def other_node(t: float) -> NodeProfileUpdate:
    card = GpuState(index=0, milli_free=0, mode=SharingMode.EXCLUSIVE, pods=("batch/solo",))
    return NodeProfileUpdate("ex-1", _profile("ex-1", card, ("batch/solo",), t), at(t))


def _profile(name: str, card: GpuState, pods: tuple[str, ...], t: float) -> NodeProfile:
    return NodeProfile(
        name=name,
        gpu_model="H100",
        gpus=(card,),
        cpu_milli_allocatable=32_000,
        memory_mib_allocatable=131_072,
        pods=tuple(sorted(pods)),
        updated_at=at(t),
    )


Step = tuple[ProfileUpdate | datetime, set[tuple[str, str]]]

INCIDENT: list[Step] = [
    (card_node(0, 2_000), set()),
    (other_node(0), set()),
    *[(task(k, 0, node="ts-0"), set()) for k in ON_CARD],
    (task("batch/solo", 0, node="ex-1"), set()),
    (card_node(30, 20_000), set()),
    (card_node(60, 60_000), set()),
    (task(VICTIMS[0], 70, node="ts-0", ooms=1), set()),
    (task("batch/solo", 75, node="ex-1", ooms=1), set()),  # unrelated, alone on its card
    (task(VICTIMS[1], 80, node="ts-0", ooms=1), set()),
    (task(VICTIMS[2], 90, node="ts-0", ooms=1), {("open", "ts-0/0")}),  # 3 in 60 s
    (task(VICTIMS[3], 100, node="ts-0", ooms=1), set()),
    (task("batch/solo", 200, node="ex-1", ooms=2), set()),  # 2 in 125 s: below 3 in 60 s
    (at(399), set()),
    (at(400), {("resolved", "ts-0/0")}),  # 300 s after the last OOM on the card
]


def analysis() -> ClusterAnalysis:
    return ClusterAnalysis(
        detectors=ONLY_STORMS, typical=TypicalPods(pods=(), coverage=1.0, observed_pods=0)
    )


def play(a: ClusterAnalysis, steps: list[Step]) -> list[Signal]:
    seen: list[Signal] = []
    for i, (item, expected) in enumerate(steps):
        out: list[Signal] = []
        if isinstance(item, datetime):
            out += a.advance(item)
        else:
            out += a.apply(item)
            out += a.advance(item.at)
        got = {(s.state, s.scope_id) for s in out if s.kind == "oom_storm"}
        assert got == expected, f"step {i}: {item!r}"
        seen += out
    return seen


def test_the_scripted_incident_opens_one_storm_naming_the_aggressor_and_resolves_it() -> None:
    (opened, _) = [s for s in play(analysis(), INCIDENT) if s.kind == "oom_storm"]
    assert opened.scope.value == "gpu" and opened.severity.value == "critical"
    assert opened.evidence["victims"] == VICTIMS[:3]
    assert opened.evidence["aggressor"] == AGGRESSOR
    # within the card window (60 s) before the first kill at 70 s: 20,000 -> 60,000 MiB
    assert opened.evidence["aggressor_growth_mib"] == 40_000.0
    assert opened.evidence["first_oom_at"] == at(70).isoformat()


def test_without_memory_figures_the_aggressor_is_unknown() -> None:
    steps = [
        s for s in INCIDENT if not (isinstance(s[0], NodeProfileUpdate) and s[0].name == "ts-0")
    ]
    # the card's pods must still be known: one profile without per-pod figures
    bare = card_node(0, 0).profile
    assert bare is not None
    card = bare.gpus[0].model_copy(update={"pod_memory_mib": {}})
    blank = NodeProfileUpdate("ts-0", bare.model_copy(update={"gpus": (card,)}), at(0))
    (opened, _) = [s for s in play(analysis(), [(blank, set()), *steps]) if s.kind == "oom_storm"]
    assert opened.evidence["aggressor"] == "unknown"


def test_a_restart_mid_incident_gives_the_same_signals() -> None:
    whole = [(s.state, s.scope_id, s.opened_at) for s in play(analysis(), INCIDENT)]
    for cut in (9, 10, 12):
        first = analysis()
        first.restore({})
        play(first, INCIDENT[:cut])
        saved = {k: v for k, v in first.snapshot().items() if v is not None}
        second = analysis()
        second.restore(saved)
        before = [(s.state, s.scope_id, s.opened_at) for s in play(analysis(), INCIDENT[:cut])]
        after = [(s.state, s.scope_id, s.opened_at) for s in play(second, INCIDENT[cut:])]
        assert before + after == whole, cut


def test_pods_never_killed_add_nothing_to_the_saved_clock() -> None:
    # the clock entry is written whenever it changes (every instant, with the view's time): a
    # count per pod would grow it with the cluster
    a = analysis()
    for i in range(200):
        a.apply(task(f"serving/p{i}", 1, node="ts-0"))
    a.advance(at(1))
    (storms,) = [d for d in a.detectors if d.name == "oom_storm"]
    assert storms.clock_state()["counted"] == {}
    assert all(w == {} for w in storms.clock_state()["windows"].values())  # type: ignore[union-attr]
