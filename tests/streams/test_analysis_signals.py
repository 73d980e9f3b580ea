"""The analysis operator as scenario tables: each input with the signals it opens and resolves."""

from __future__ import annotations

from datetime import datetime

import pytest

from models import DetectorSettings, GangRef, PodPhase, Signal, fingerprint_of
from models.settings import FragmentationSettings, UnplaceablePendingSettings
from models.signals import Scope, SignalKind
from streams.cluster_analysis import ClusterAnalysis
from streams.fragmentation.measure import FragMeasure, NodeState
from streams.fragmentation.shapes import PodShape, TypicalPod, TypicalPods
from streams.profiles.join import NodeProfileUpdate, ProfileUpdate, TaskProfileUpdate
from tests.streams.profiles_helpers import at, node, task

# One typical GPU pod: 4 cores and half a card (memory 1 GiB, as the helper's tasks ask).
TYPICAL = TypicalPods(
    pods=(TypicalPod(PodShape(4_000, 500, 1), 1.0),), coverage=1.0, observed_pods=1
)
SETTINGS = DetectorSettings(
    unplaceable_pending=UnplaceablePendingSettings(evaluate_every_s=0),
    fragmentation=FragmentationSettings(ratio_open_pct=40, ratio_resolve_pct=30),
)
EVERY_60_S = DetectorSettings(unplaceable_pending=UnplaceablePendingSettings(evaluate_every_s=60))

Step = tuple[ProfileUpdate | datetime, set[tuple[str, str, str]]]


def run(steps: list[Step], analysis: ClusterAnalysis) -> None:
    for i, (item, expected) in enumerate(steps):
        out: list[Signal] = []
        if isinstance(item, datetime):
            out += analysis.advance(item)
        else:
            out += analysis.apply(item)
            out += analysis.advance(item.at)
        got = {(s.kind, s.state, s.scope_id) for s in out}
        assert got == expected, f"step {i}: {item!r}"


def test_stranded_gpus_open_when_cpu_runs_out_and_resolve_when_it_returns() -> None:
    a = ClusterAnalysis(detectors=SETTINGS, typical=TYPICAL)
    run(
        [
            (NodeProfileUpdate("n1", node("n1", gpus=(1000, 1000)), at(0)), set()),
            # 2 cores left: no typical GPU pod (4 cores) fits, 2 cards idle -> stranded, and all
            # idle GPU is fragment -> cluster fragmentation too.
            (
                NodeProfileUpdate("n1", node("n1", gpus=(1000, 1000), cpu_free=2_000), at(10)),
                {
                    ("stranded_gpus", "open", "n1"),
                    ("fragmentation", "open", "cluster"),
                },
            ),
            # still stranded: nothing new is emitted
            (NodeProfileUpdate("n1", node("n1", gpus=(1000, 0), cpu_free=2_000), at(20)), set()),
            (
                NodeProfileUpdate("n1", node("n1", gpus=(1000, 0), cpu_free=8_000), at(30)),
                {
                    ("stranded_gpus", "resolved", "n1"),
                    ("fragmentation", "resolved", "cluster"),
                },
            ),
            (NodeProfileUpdate("n1", None, at(40)), set()),
        ],
        a,
    )
    assert a.open == {}


def test_unplaceable_pending_opens_with_reasons_and_resolves_when_bound() -> None:
    a = ClusterAnalysis(detectors=SETTINGS, typical=TYPICAL)
    pending = task("ml/train", gpus=2, milli=1000)
    bound = task("ml/train", gpus=2, milli=1000, node_name="n1", phase=PodPhase.RUNNING)
    run(
        [
            (NodeProfileUpdate("n1", node("n1", gpus=(1000, 0)), at(0)), set()),
            (NodeProfileUpdate("n2", node("n2", gpus=(0, 1000)), at(0)), set()),
            (
                TaskProfileUpdate("ml/train", pending, at(5)),
                {("unplaceable_pending", "open", "ml/train")},
            ),
            (at(60), set()),  # still blocked, no repeat
            # a card frees on n1: the pod now fits a node, so the signal resolves
            (
                NodeProfileUpdate("n1", node("n1", gpus=(1000, 1000)), at(70)),
                {("unplaceable_pending", "resolved", "ml/train")},
            ),
            (TaskProfileUpdate("ml/train", bound, at(71)), set()),
        ],
        a,
    )
    assert a.summary().pending_pods == 0


def test_unplaceable_evidence_and_stable_fingerprint() -> None:
    a = ClusterAnalysis(detectors=SETTINGS, typical=TYPICAL)
    a.apply(NodeProfileUpdate("n1", node("n1", gpus=(1000, 0)), at(0)))
    a.apply(NodeProfileUpdate("n2", node("n2", gpus=(0, 1000)), at(0)))
    a.apply(TaskProfileUpdate("ml/train", task("ml/train", gpus=2, milli=1000), at(1)))
    (sig,) = a.advance(at(1))
    assert sig.fingerprint == fingerprint_of(SignalKind.UNPLACEABLE_PENDING, Scope.POD, "ml/train")
    assert sig.evidence["blocking"] == {"gpu_count": 2}
    assert sig.evidence["request"] == {
        "cpu_milli": 1000,
        "memory_mib": 1024,
        "gpu_count": 2,
        "gpu_milli": 1000,
        "gpu_models": [],
    }
    assert "fits the cluster's free total but no node" in sig.summary
    assert a.explanations["ml/train"].unplaceable


def test_gang_signal_covers_its_members() -> None:
    a = ClusterAnalysis(detectors=SETTINGS, typical=TYPICAL)
    ref = GangRef(name="job", min_member=2)
    run(
        [
            (NodeProfileUpdate("n1", node("n1", gpus=(1000, 1000)), at(0)), set()),
            (NodeProfileUpdate("n2", node("n2", gpus=(1000,)), at(0)), set()),
            (NodeProfileUpdate("n3", node("n3", gpus=(1000,)), at(0)), set()),
            (TaskProfileUpdate("ml/w0", task("ml/w0", gpus=2, milli=1000, gang=ref), at(1)), set()),
            (
                TaskProfileUpdate("ml/w1", task("ml/w1", gpus=2, milli=1000, gang=ref), at(2)),
                {("unplaceable_pending", "open", "ml/gang:job")},
            ),
            (
                TaskProfileUpdate("ml/w1", None, at(3)),  # one member gone: gang waits, no signal
                {("unplaceable_pending", "resolved", "ml/gang:job")},
            ),
        ],
        a,
    )


def test_evaluation_is_rate_limited_by_event_time() -> None:
    a = ClusterAnalysis(detectors=EVERY_60_S, typical=TYPICAL)
    a.apply(NodeProfileUpdate("n1", node("n1", gpus=(1000, 0)), at(0)))
    a.apply(NodeProfileUpdate("n2", node("n2", gpus=(0, 1000)), at(0)))
    assert a.advance(at(0)) == []  # first evaluation: nothing pending
    a.apply(TaskProfileUpdate("ml/p", task("ml/p", gpus=2, milli=1000), at(10)))
    assert a.advance(at(10)) == []  # 10 s after the last evaluation: not yet
    (sig,) = a.advance(at(60))
    assert sig.opened_at == at(60)
    assert a.advance(at(30)) == []  # time never goes back: a late tick is the current time
    assert a.now == at(60)


@pytest.mark.parametrize(
    ("ratios", "states"),
    [
        # open at >= 40 %, resolve below 30 %: 35 % neither opens nor resolves
        ([50, 35, 45, 25], ["open", None, None, "resolved"]),
        ([35, 39, 41, 31, 29], [None, None, "open", None, "resolved"]),
    ],
)
def test_cluster_fragmentation_hysteresis(ratios: list[int], states: list[str | None]) -> None:
    # one node, 10 cards: the typical pod needs 4 cores; k idle cards of 100 milli each are all
    # fragment (share 500 does not fit), the rest are 1000-milli idle cards that are not.
    a = ClusterAnalysis(detectors=SETTINGS, typical=TYPICAL)
    for step, ratio in enumerate(ratios):
        # fragment cards: f cards at 100 milli; usable: u cards at 1000 -> ratio = 100f/(100f+1000u)
        f, u = {
            50: (10, 1),
            35: (27, 5),
            45: (9, 1),
            25: (10, 3),
            39: (32, 5),
            41: (7, 1),
            31: (9, 2),
            29: (4, 1),
        }[ratio]
        gpus = tuple([100] * f + [1000] * u)
        out = a.apply(NodeProfileUpdate("n1", node("n1", gpus=gpus), at(step)))
        out += a.advance(at(step))
        got = [s.state for s in out if s.kind == SignalKind.FRAGMENTATION]
        assert got == ([] if states[step] is None else [states[step]]), (step, ratio)


class CountingMeasure(FragMeasure):
    def __init__(self, typical: TypicalPods) -> None:
        super().__init__(typical)
        self.calls = 0

    def frag_milli(self, state: NodeState) -> float:
        self.calls += 1
        return super().frag_milli(state)


@pytest.mark.parametrize("cluster_size", [10, 1000])
def test_a_node_change_costs_one_measure_lookup_whatever_the_cluster_size(
    cluster_size: int,
) -> None:
    a = ClusterAnalysis(detectors=SETTINGS, typical=TYPICAL)
    measure = CountingMeasure(TYPICAL)
    a.index.set_measure(measure)
    for i in range(cluster_size):
        a.apply(NodeProfileUpdate(f"n{i}", node(f"n{i}", gpus=(1000, 1000)), at(0)))
    before = measure.calls
    a.apply(NodeProfileUpdate("n3", node("n3", gpus=(500, 1000)), at(1)))
    a.advance(at(1))
    assert measure.calls - before == 1
    assert a.index.frag_milli == pytest.approx(
        sum(measure.frag_milli(a.index.state(i)) for i in a.index.slot.values())
    )


def test_a_pending_pod_that_goes_away_resolves_at_once_and_stops_counting() -> None:
    a = ClusterAnalysis(detectors=EVERY_60_S, typical=TYPICAL)
    a.apply(NodeProfileUpdate("n1", node("n1", gpus=(1000, 0)), at(0)))
    a.apply(NodeProfileUpdate("n2", node("n2", gpus=(0, 1000)), at(0)))
    a.apply(TaskProfileUpdate("ml/p", task("ml/p", gpus=2, milli=1000), at(1)))
    (opened,) = a.advance(at(1))
    assert a.summary().unplaceable_pods == 1
    (resolved,) = a.apply(TaskProfileUpdate("ml/p", None, at(5)))  # deleted between evaluations
    assert (resolved.fingerprint, resolved.state, resolved.resolved_at) == (
        opened.fingerprint,
        "resolved",
        at(5),
    )
    assert a.summary().unplaceable_pods == 0
    assert a.advance(at(70)) == []
