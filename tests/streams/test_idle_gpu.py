"""Idle and underused cards as scenario tables, from raw events through the join and the cluster
operator: each reading with the ``idle_gpu`` signals it opens and resolves. Defaults: a 30 min
window, quiet below 10 % activity, small below 25 % of the card's memory, idle below 1 %, and
a gap of more than 300 s between readings ends a run. An H100 of 81,559 MiB: 25 % is 20,390."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from models import (
    Envelope,
    GpufragSettings,
    GpuSample,
    GpuSampleEvent,
    Node,
    NodeEvent,
    PayloadModel,
    Pod,
    PodEvent,
    PodPhase,
    ResourceRequest,
)
from models.cards import SharingMode
from streams.pipeline import Pipeline, define_pipeline
from tests.streams.pipeline_feed import feed

T0 = datetime(2026, 12, 2, 4, 0, tzinfo=UTC)
TOTAL = 81_559.0
POD = "nb/alice"


def at(s: float) -> datetime:
    return T0 + timedelta(seconds=s)


def node(*, replicas: int = 1) -> NodeEvent:
    sharing = SharingMode.TIME_SLICED if replicas > 1 else SharingMode.EXCLUSIVE
    return NodeEvent(
        change="upsert",
        node=Node(
            name="h100-0",
            cpu_milli=64_000,
            memory_mib=262_144,
            gpu_model="H100-80GB",
            gpu_count=1,
            gpu_replicas=replicas,
            gpu_sharing=sharing,
        ),
    )


def pod(key: str = POD, *, change: str = "upsert") -> PodEvent:
    ns, name = key.split("/")
    return PodEvent(
        change=change,
        pod=Pod(
            namespace=ns,
            name=name,
            uid=f"u-{name}",
            phase=PodPhase.RUNNING,
            node="h100-0",
            requests=ResourceRequest(cpu_milli=1000, memory_mib=1024, gpu_count=1, gpu_milli=1000),
            created_at=T0,
        ),
    )


def reading(mib: float | None, active_pct: float | None) -> GpuSampleEvent:
    return GpuSampleEvent(
        sample=GpuSample(
            node="h100-0",
            gpu_index=0,
            memory_total_mib=TOTAL,
            memory_used_mib=mib,
            engine_active=None if active_pct is None else active_pct / 100,
        )
    )


Row = tuple[float, PayloadModel, set[tuple[str, str]]]


def play(rows: list[Row], p: Pipeline | None = None) -> Pipeline:
    p = p or define_pipeline(GpufragSettings()).build()
    for i, (s, payload, expected) in enumerate(rows):
        env = Envelope.wrap(payload, event_time=at(s), source="test")
        out = feed(p, env)
        got = {(x.state, x.scope_id) for x in out if x.kind == "idle_gpu"}
        assert got == expected, f"row {i} at {s} s: {payload!r}"
    return p


def every(start: float, stop: float, mib: float | None, active: float | None) -> list[Row]:
    """A reading every 120 s in [start, stop), none of which changes a signal."""
    return [(float(t), reading(mib, active), set()) for t in range(int(start), int(stop), 120)]


OPEN, RESOLVED = {("open", POD)}, {("resolved", POD)}


def test_a_whole_card_held_by_small_work_opens_after_the_window_and_resolves_when_busy() -> None:
    p = play(
        [
            (0, node(), set()),
            (1, pod(), set()),
            *every(10, 1_810, 4_000, 3),  # quiet from 10 s, 4.9 % of the memory
            (1_810, reading(4_100, 4), OPEN),  # 1,800 s of quiet readings
            (1_930, reading(4_100, 4), set()),
            (2_050, reading(4_100, 60), RESOLVED),  # busy: the run ends
            *every(2_170, 3_970, 4_000, 2),  # quiet again from 2,170 s
            (3_970, reading(4_000, 2), OPEN),
        ]
    )
    (sig,) = p.cluster.book.open.values()
    e = sig.evidence
    assert (e["reason"], e["gpus"], e["whole_cards"]) == ("small_work", [0], True)
    assert e["peak_memory_mib"] == 4_000 and e["peak_activity_pct"] == 2
    assert e["quiet_since"] == at(2_170).isoformat()
    # 4.9 % with a fifth to spare: one of 8 replicas, or a 1g instance (an eighth)
    assert e["would_serve"] == {
        "time_sliced_replicas": 8,
        "mig_compute_slices": 1,
        "mig_memory_share": 0.125,
    }


def test_memory_above_the_share_is_not_small_work_and_a_peak_above_it_resolves() -> None:
    play(
        [
            (0, node(), set()),
            (1, pod(), set()),
            *every(10, 1_810, 25_000, 5),  # 30.7 % of the card, 5 % active: neither
            (1_810, reading(25_000, 5), set()),
            *every(1_930, 3_730, 12_000, 5),  # a new run? no: the peak of the run stays
            (3_730, reading(12_000, 5), set()),
            (3_850, reading(12_000, 50), set()),  # busy: a new run from the next quiet one
            *every(3_970, 5_770, 12_000, 5),  # 14.7 %
            (5_770, reading(12_000, 5), OPEN),
            (5_890, reading(21_000, 5), RESOLVED),  # 25.7 %: the peak crossed the share
        ]
    )


def test_an_allocated_card_left_idle_is_found_whatever_memory_it_holds() -> None:
    p = play(
        [
            (0, node(), set()),
            (1, pod(), set()),
            *every(10, 1_810, 70_000, 0),  # a loaded model, no work
            (1_810, reading(70_000, 0.5), OPEN),
            (1_930, reading(70_000, 3), RESOLVED),  # 3 %: quiet, but no longer idle
        ]
    )
    assert p.join.node_profiles["h100-0"].gpus[0].quiet_held


def test_a_gap_in_the_readings_is_not_idleness() -> None:
    play(
        [
            (0, node(), set()),
            (1, pod(), set()),
            *every(10, 1_210, 4_000, 1),
            # no readings for 420 s (> 300): the run starts again at 1,510 s
            *every(1_510, 3_310, 4_000, 1),
            (3_310, reading(4_000, 1), OPEN),
        ]
    )


def test_a_reading_without_an_activity_figure_ends_the_run() -> None:
    play(
        [
            (0, node(), set()),
            (1, pod(), set()),
            *every(10, 1_000, 4_000, 1),
            (1_000, reading(4_000, None), set()),
            *every(1_120, 2_920, 4_000, 1),
            (2_920, reading(4_000, 1), OPEN),
        ]
    )


def test_an_idle_shared_card_tells_each_pod_on_it_and_a_pod_leaving_resolves_its_own() -> None:
    other = "nb/bob"
    play(
        [
            (0, node(replicas=4), set()),
            (1, pod(), set()),
            (2, pod(other), set()),
            *every(10, 1_810, 2_000, 0),
            (1_810, reading(2_000, 0), {("open", POD), ("open", other)}),
            (1_900, pod(other, change="delete"), {("resolved", other)}),
        ]
    )


def test_readings_stopping_do_not_open_a_signal_as_time_passes() -> None:
    p = play([(0, node(), set()), (1, pod(), set()), *every(10, 1_210, 4_000, 1)])
    assert not [s for s in p.cluster.advance(at(7_200)) if s.kind == "idle_gpu"]


def test_a_restarted_host_keeps_the_quiet_run() -> None:
    p = define_pipeline(GpufragSettings()).build()
    p.join.restore({})
    p.cluster.restore({})
    play([(0, node(), set()), (1, pod(), set()), *every(10, 1_210, 4_000, 1)], p)
    q = define_pipeline(GpufragSettings()).build()
    q.join.restore({k: v for k, v in p.join.snapshot().items() if v is not None})
    q.cluster.restore({k: v for k, v in p.cluster.snapshot().items() if v is not None})
    play([*every(1_210, 1_810, 4_000, 1), (1_810, reading(4_000, 1), OPEN)], q)


def test_a_pod_bound_to_a_card_that_was_already_quiet_counts_from_its_binding() -> None:
    play(
        [
            (0, node(), set()),
            *every(10, 3_610, 0, 0),  # nobody's card, quiet for an hour
            (3_610, pod(), set()),  # bound now: loading, not idle
            *every(3_620, 5_410, 4_000, 0.5),
            (5_410, reading(4_000, 0.5), OPEN),  # 1,800 s after its binding
        ]
    )


def test_a_card_out_of_service_is_not_called_idle() -> None:
    def broken(t: float) -> Row:
        # the exporter's gauge keeps reading XID 79 (no counts): never reset, still out
        sample = reading(4_000, 0).sample.model_copy(update={"xid": 79})
        return (t, GpuSampleEvent(sample=sample), set())

    play([(0, node(), set()), (1, pod(), set()), *[broken(t) for t in range(10, 1_931, 120)]])
