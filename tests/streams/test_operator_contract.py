"""The operator contract as the runners use it: snapshots restored into fresh operators carry
on exactly where the originals were, and detectors switched off by their settings stay out.

The Faust worker relies on the first after every restart and rebalance (its tables hold the
snapshot entries); these tests check it without a broker, on the reduced real replay.
"""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime

import pytest

from connectors.trace.alibaba_csv import read_nodes, read_pods
from connectors.trace.bundled import bundled_nodes_path, bundled_pods_path
from models import DetectorSettings, Envelope, GpufragSettings, Signal
from models.settings import StrandedGpusSettings, UnplaceablePendingSettings
from streams.app.replaying.workload import pod_shape
from streams.cluster_analysis import ClusterAnalysis
from streams.fragmentation.shapes import TypicalPods
from streams.instants import Instants, OrderKey
from streams.operator import StateChanges
from streams.pipeline import define_pipeline
from streams.profiles.join import NodeProfileUpdate, ProfileUpdate, TaskProfileUpdate
from streams.profiles.operators import ProfileJoin, ordered_deltas
from streams.simulation.cluster import ReplayOptions, SimulatedCluster, TraceMode
from tests.streams.profiles_helpers import at, node, task

PODS = read_pods(bundled_pods_path())
TYPICAL = TypicalPods.from_shapes(map(pod_shape, PODS))


def _events() -> list[Envelope]:
    sim = SimulatedCluster(
        read_nodes(bundled_nodes_path()),
        PODS,
        options=ReplayOptions(mode=TraceMode.FGD, node_limit=40, source="t"),
    )
    return [env.model_copy(update={"seq": n}) for n, env in enumerate(sim.events())]


EVENTS = _events()


def _deltas() -> list[tuple[OrderKey, ProfileUpdate]]:
    join = ProfileJoin()
    return [d for env in EVENTS for d in ordered_deltas(env, join.apply(env))]


DELTAS = _deltas()
TIMES = sorted({k.at for k, _ in DELTAS})


def _keys(signals: list[Signal]) -> list[tuple[object, ...]]:
    return sorted(
        (s.fingerprint, s.state, s.opened_at, s.resolved_at, repr(sorted(s.evidence.items())))
        for s in signals
    )


def _run(
    op: ClusterAnalysis, *, after: datetime | None = None, upto: datetime | None = None
) -> tuple[list[Signal], Instants[ProfileUpdate, Signal]]:
    """The deltas of the instants in (after, upto], each instant released in turn."""
    ia: Instants[ProfileUpdate, Signal] = Instants(op)
    ia.watermark = after
    out: list[Signal] = []
    for t in TIMES:
        if (after is not None and t <= after) or (upto is not None and t > upto):
            continue
        for key, d in DELTAS:
            if key.at == t:
                out += ia.add(key, d)
        out += ia.release(t)
    return out, ia


def _accumulate(into: dict[str, bytes], changes: StateChanges) -> None:
    for k, v in changes.items():
        if v is None:
            into.pop(k, None)
        else:
            into[k] = v


@pytest.mark.parametrize("cut", [0.25, 0.5, 0.9])
def test_a_cluster_operator_restored_from_its_snapshots_goes_on_like_the_original(
    cut: float,
) -> None:
    whole_op = ClusterAnalysis(typical=TYPICAL)
    whole, _ = _run(whole_op)
    mark = TIMES[int(len(TIMES) * cut)]
    first = ClusterAnalysis(typical=TYPICAL)
    first.restore({})  # a host that persists its state: changes recorded from the start
    before, ia = _run(first, upto=mark)
    assert ia.watermark == mark
    table: dict[str, bytes] = {}
    _accumulate(table, first.snapshot())
    second = ClusterAnalysis(typical=TYPICAL)
    second.restore(table)
    assert second.open == first.open
    assert second.next_due() == first.next_due()
    rest, _ = _run(second, after=mark)
    assert _keys(before + rest) == _keys(whole)
    assert second.view.nodes == whole_op.view.nodes
    assert second.view.tasks == whole_op.view.tasks
    # running sums of floats, added in another order: equal to rounding
    assert asdict(second.summary()) == pytest.approx(asdict(whole_op.summary()))


def test_an_operator_no_host_restored_records_no_changes() -> None:
    """The embedded runner never persists: its operators must not keep every key they saw."""
    op = ClusterAnalysis(typical=TYPICAL)
    join = ProfileJoin()
    for env in EVENTS[:200]:
        join.apply(env)
    for _, d in DELTAS[:200]:
        op.apply(d)
    assert set(op.snapshot()) <= {"clock"}
    assert join.snapshot() == {}


def test_snapshots_hold_only_what_changed_since_the_last() -> None:
    op = ClusterAnalysis(typical=TYPICAL)
    op.restore({})
    _, delta = DELTAS[0]
    op.apply(delta)
    first = op.snapshot()
    assert first  # the delta's profile and the schedule
    assert op.snapshot() == {}  # nothing happened since


def test_the_join_halves_restored_from_snapshots_make_the_same_profiles() -> None:
    whole = ProfileJoin()
    for env in EVENTS:
        whole.apply(env)
    half = len(EVENTS) // 2
    first = ProfileJoin()
    first.restore({})
    table: dict[str, bytes] = {}
    for env in EVENTS[:half]:
        first.apply(env)
        _accumulate(table, first.snapshot())
    second = ProfileJoin()
    second.restore(table)
    for env in EVENTS[half:]:
        second.apply(env)
    assert second.tasks == whole.tasks
    assert second.node_profiles == whole.node_profiles


def test_a_detector_switched_off_by_its_settings_emits_nothing_and_changes_no_other() -> None:
    on = define_pipeline(GpufragSettings(), typical=TYPICAL).cluster()
    off_settings = GpufragSettings(
        detectors=DetectorSettings(stranded_gpus=StrandedGpusSettings(enabled=False))
    )
    off = define_pipeline(off_settings, typical=TYPICAL).cluster()
    with_all, _ = _run(on)
    without, _ = _run(off)
    kinds = {s.kind for s in with_all}
    assert "stranded_gpus" in kinds
    assert _keys(without) == _keys([s for s in with_all if s.kind != "stranded_gpus"])
    assert off.summary().stranded_nodes == 0 < on.summary().stranded_nodes


def test_a_report_carries_explanations_only_after_an_advance_that_evaluated_them() -> None:
    every_60_s = DetectorSettings(
        unplaceable_pending=UnplaceablePendingSettings(evaluate_every_s=60)
    )
    a = ClusterAnalysis(detectors=every_60_s, typical=TYPICAL)
    a.apply(NodeProfileUpdate("n1", node("n1", gpus=(1000, 0)), at(0)))
    a.advance(at(0))  # the first evaluation
    assert a.report(at(0)).explanations == {}
    a.apply(TaskProfileUpdate("ml/p", task("ml/p", gpus=1, milli=1000), at(70)))
    a.advance(at(70))  # 70 s after the last: evaluated again, with the pending pod
    assert set(a.report(at(70)).explanations or {}) == {"ml/p"}
    a.apply(NodeProfileUpdate("n1", node("n1", gpus=(1000, 1000)), at(80)))
    a.advance(at(80))  # changed, but only 10 s later: not evaluated
    assert a.report(at(80)).explanations is None
    assert a.report(at(80), explain=True).explanations is not None
