"""Event-time order: the stage watermarks, the reorder buffer, and the per-instant analysis.

The distributed runner's equality with the embedded one rests on two claims tested here without
a broker: a stage releases an item only once every source it hears from is past it, and the
analysis's signals do not depend on how its input was cut into releases.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from models import EventKind, GpufragSettings, NodeEvent, PodEvent
from models.progress import SourceProgress
from streams.cluster_analysis import ClusterAnalysis
from streams.distributed.ordering import Reorder, Watermarks
from streams.instants import Instants, OrderKey
from streams.pipeline import define_pipeline
from tests.app.reference_replay import operator_run
from tests.streams.oom_incident import node, pod, wrap

T0 = datetime(2024, 1, 1, tzinfo=UTC)


def at(s: float) -> datetime:
    return T0 + timedelta(seconds=s)


def progress(source: str, upto_s: float, *kinds: EventKind) -> SourceProgress:
    return SourceProgress(source=source, upto=at(upto_s), kinds=kinds)


def task_marks() -> Watermarks:
    return Watermarks(topic_of_kind={EventKind.POD: "pods", EventKind.SCHEDULER: "sched"})


def test_a_source_counts_only_once_it_reported_on_every_topic_it_writes() -> None:
    w = task_marks()
    both = (EventKind.POD, EventKind.SCHEDULER)
    assert w.current() is None
    w.on_progress("pods", progress("pub", 10, *both))
    assert w.current() is None  # its scheduler events may still be on the way
    w.on_progress("sched", progress("pub", 7, *both))
    assert w.current() == at(7)
    w.on_progress("sched", progress("pub", 12, *both))
    assert w.current() == at(10)
    # a watcher that writes pods only is waited for on pods only
    w.on_progress("pods", progress("watcher", 5, EventKind.POD))
    assert w.current() == at(5)


def test_fixed_upstream_partitions_are_waited_for_before_they_ever_report() -> None:
    w = Watermarks(topic_of_kind={}, fixed={"tasks/0": "deltas", "tasks/1": "deltas"})
    w.on_progress("deltas", progress("tasks/0", 3))
    assert w.current() is None
    w.on_progress("deltas", progress("tasks/1", 2))
    assert w.current() == at(2)
    assert not w.on_progress("deltas", progress("tasks/1", 1))  # never backwards
    assert w.current() == at(2)


def test_a_source_far_behind_the_others_stops_holding_them_back() -> None:
    w = Watermarks(topic_of_kind={EventKind.POD: "pods"}, max_source_lag_s=60)
    w.on_progress("pods", progress("old", 100, EventKind.POD))
    w.on_progress("pods", progress("live", 150, EventKind.POD))
    assert w.current() == at(100)
    w.on_progress("pods", progress("live", 161, EventKind.POD))
    assert w.current() == at(161)


def test_items_come_out_in_source_order_once_the_watermark_passes_them() -> None:
    # scenario table: (what arrives, released after it)
    buf: Reorder[str] = Reorder(task_marks())
    both = (EventKind.POD, EventKind.SCHEDULER)
    steps: list[tuple[tuple[str, object], list[str]]] = [
        (("item", (OrderKey(at(2), 3, "pub", "c"), "c")), []),
        (("item", (OrderKey(at(1), 1, "pub", "a"), "a")), []),
        (("progress", ("pods", progress("pub", 2, *both))), []),
        (("item", (OrderKey(at(1), 2, "pub", "b"), "b")), []),
        (("progress", ("sched", progress("pub", 1, *both))), ["a", "b"]),
        (("item", (OrderKey(at(3), 4, "pub", "d"), "d")), []),
        (("progress", ("sched", progress("pub", 3, *both))), ["c"]),
        (("progress", ("pods", progress("pub", 5, *both))), ["d"]),
    ]
    for (kind, arg), want in steps:
        if kind == "item":
            key, item = arg  # type: ignore[misc]
            buf.add(key, item)
            assert buf.ready() == (None, [])
            continue
        topic, p = arg  # type: ignore[misc]
        buf.watermarks.on_progress(topic, p)
        _, out = buf.ready()
        assert [i for _, i in out] == want
    assert len(buf) == 0
    assert buf.lateness(at(3)) == "late"  # nothing restored: a broken promise, not a copy
    assert buf.lateness(at(6)) is None


def test_copies_at_or_before_the_restored_mark_are_redeliveries() -> None:
    buf: Reorder[str] = Reorder(task_marks(), released=at(10), restored=at(10))
    assert buf.lateness(at(10)) == "redelivered"
    buf.released = at(20)
    assert buf.lateness(at(15)) == "late"
    assert buf.lateness(at(21)) is None


def _replay_deltas() -> list[tuple[OrderKey, object]]:
    from connectors.trace.alibaba_csv import read_nodes, read_pods
    from connectors.trace.bundled import bundled_nodes_path, bundled_pods_path
    from streams.profiles.operators import ProfileJoin, ordered_deltas
    from streams.simulation.cluster import ReplayOptions, SimulatedCluster, TraceMode

    sim = SimulatedCluster(
        read_nodes(bundled_nodes_path()),
        read_pods(bundled_pods_path()),
        options=ReplayOptions(mode=TraceMode.FGD, node_limit=40, source="t"),
    )
    join = ProfileJoin()
    out: list[tuple[OrderKey, object]] = []
    for n, env in enumerate(sim.events()):
        env = env.model_copy(update={"seq": n})
        out += ordered_deltas(env, join.apply(env))
    return out


DELTAS = _replay_deltas()


def _typical() -> object:
    from connectors.trace.alibaba_csv import read_pods
    from connectors.trace.bundled import bundled_pods_path
    from streams.app.replaying.workload import pod_shape
    from streams.fragmentation.shapes import TypicalPods

    return TypicalPods.from_shapes(map(pod_shape, read_pods(bundled_pods_path())))


TYPICAL = _typical()


def _signals(cuts: list[int], order: list[int]) -> set[tuple[object, ...]]:
    """Deltas delivered in a shuffled arrival order, released at the given instants."""
    a = ClusterAnalysis(typical=TYPICAL)  # type: ignore[arg-type]
    ia = Instants(a)
    times = sorted({k.at for k, _ in DELTAS})
    marks = sorted({times[c % len(times)] for c in cuts} | {times[-1]})
    # deliver in the shuffled order, but never a delta older than a released mark (the
    # watermark's promise): everything up to a mark arrives before the mark is released
    out = []
    pending = [DELTAS[i] for i in order]
    for m in marks:
        for key, d in [x for x in pending if x[0].at <= m]:
            out += ia.add(key, d)  # type: ignore[arg-type]
        pending = [x for x in pending if x[0].at > m]
        out += ia.release(m)
    return {
        (s.fingerprint, s.state, s.opened_at, s.resolved_at, repr(sorted(s.evidence.items())))
        for s in out
    }


REFERENCE = _signals([], list(range(len(DELTAS))))


@settings(max_examples=25, deadline=None)
@given(
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=30),
    seed=st.randoms(use_true_random=False),
)
def test_signals_do_not_depend_on_arrival_order_or_on_where_releases_cut(
    cuts: list[int], seed: object
) -> None:
    order = list(range(len(DELTAS)))
    seed.shuffle(order)  # type: ignore[attr-defined]
    assert _signals(cuts, order) == REFERENCE


def test_the_reference_loop_sees_every_kind_of_signal() -> None:
    kinds = {s.kind for s in operator_run(flush=False)[0]}
    assert kinds == {"stranded_gpus", "fragmentation", "unplaceable_pending"}


def test_after_a_restart_every_known_source_is_waited_for_again() -> None:
    before = task_marks()
    both = (EventKind.POD, EventKind.SCHEDULER)
    for topic in ("pods", "sched"):
        before.on_progress(topic, progress("kube@a", 50, *both))
        before.on_progress(topic, progress("kube@b", 100, *both))
    assert before.current() == at(50)
    after = task_marks()  # a restarted stage: reports come back in any order
    after.expect(before.known())
    for topic in ("pods", "sched"):
        after.on_progress(topic, progress("kube@b", 100, *both))
    assert after.current() is None  # not 100: kube@a's events up to 50+ may still be coming
    after.on_progress("pods", progress("kube@a", 50, *both))
    after.on_progress("sched", progress("kube@a", 50, *both))
    assert after.current() == at(50)


def test_same_instant_events_of_two_sources_reach_the_view_in_the_order_they_were_sent() -> None:
    """A replay with injected incidents sends a trace node and an injected pod bound to it at
    one instant, node first. Ordered by source name ("inject" < "trace"), the pod's node delta
    reached the view before the node's own, and the view kept the empty node for the whole
    instant and after; ordered by the publisher's sequence, as the join saw them, it keeps the
    pod, as the join's profile does."""
    p = define_pipeline(GpufragSettings()).build()
    instants: Instants[object, object] = Instants(p.cluster)
    sent = [
        wrap(NodeEvent(change="upsert", node=node("n-1")), 0, source="trace:t"),
        wrap(PodEvent(change="upsert", pod=pod("batch/solo", on="n-1")), 0, source="inject:i"),
        wrap(NodeEvent(change="upsert", node=node("n-2")), 10, source="trace:t"),
    ]
    for seq, env in enumerate(sent):
        env = env.model_copy(update={"seq": seq})
        instants.release(env.event_time - timedelta(microseconds=1))
        for key, update in p.ordered(env, p.join.apply(env)):
            instants.add(key, update)
    instants.release(sent[-1].event_time)
    view = p.cluster.view.nodes["n-1"]
    assert view == p.join.node_profiles["n-1"]
    assert view.gpu_milli_free_total == 0  # the pod holds the node's one card
