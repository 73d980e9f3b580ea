"""GPU health as scenario tables, from raw node events and GPU samples through the join and the
cluster operator: each input with the ``gpu_unhealthy`` signals it opens and resolves, and
whether card 0 takes new work after it. Recovery is 600 s of event time without new evidence
(the default); every way a card goes out and every way it comes back has a table."""

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
from streams.pipeline import Pipeline, define_pipeline
from tests.streams.pipeline_feed import feed

T0 = datetime(2026, 12, 2, 3, 0, tzinfo=UTC)
NODE = "h200-0"


def at(s: float) -> datetime:
    return T0 + timedelta(seconds=s)


def node(*, cordoned: bool = False, problems: dict[str, str] | None = None) -> NodeEvent:
    return NodeEvent(
        change="upsert",
        node=Node(
            name=NODE,
            cpu_milli=64_000,
            memory_mib=262_144,
            gpu_model="H200",
            gpu_count=2,
            unschedulable=cordoned,
            problems=problems or {},
        ),
    )


def pod() -> PodEvent:
    return PodEvent(
        change="upsert",
        pod=Pod(
            namespace="train",
            name="llm-0",
            uid="u-llm-0",
            phase=PodPhase.RUNNING,
            node=NODE,
            gpu_indices=(0,),
            requests=ResourceRequest(cpu_milli=1000, memory_mib=1024, gpu_count=1, gpu_milli=1000),
            created_at=T0,
        ),
    )


def sample(**kw: object) -> GpuSampleEvent:
    return GpuSampleEvent(sample=GpuSample(node=NODE, gpu_index=0, **kw))


Row = tuple[float, PayloadModel, set[tuple[str, str]], bool]
"""(event second, input, {(state, scope id)} of gpu_unhealthy signals it changes, card 0
takes new work after it)."""


def play(rows: list[Row], p: Pipeline | None = None) -> Pipeline:
    p = p or define_pipeline(GpufragSettings()).build()
    for i, (s, payload, expected, usable) in enumerate(rows):
        env = Envelope.wrap(payload, event_time=at(s), source="test")
        out = feed(p, env)
        got = {(x.state, x.scope_id) for x in out if x.kind == "gpu_unhealthy"}
        assert got == expected, f"row {i} at {s} s: {payload!r}"
        card = p.join.node_profiles[NODE].gpus[0]
        assert card.healthy == usable, f"row {i} at {s} s"
    return p


OPEN = {("open", f"{NODE}/0")}
RESOLVED = {("resolved", f"{NODE}/0")}


def test_a_counted_xid_takes_the_card_out_until_the_exporter_window_stays_clear() -> None:
    play(
        [
            (0, node(), set(), True),
            (1, pod(), set(), True),
            (10, sample(xid=79, xid_counts={79: 1}), OPEN, False),
            (130, sample(xid=79, xid_counts={79: 2}), set(), False),  # fired again: from 130 s
            (400, sample(xid=79, xid_counts={}), set(), False),  # 270 s clear: not yet
            (729, sample(xid=79, xid_counts={}), set(), False),  # 599 s
            (730, sample(xid=79, xid_counts={}), RESOLVED, True),  # 600 s, the gauge is stale
        ]
    )


def test_an_xid_gauge_without_counts_holds_the_card_until_it_clears_at_the_reset() -> None:
    play(
        [
            (0, node(), set(), True),
            (10, sample(xid=48), OPEN, False),
            (20, sample(xid=48), set(), False),  # the same code again: the stale gauge
            (900, sample(xid=48), set(), False),  # quiet for long, but never reset
            (910, sample(xid=0), RESOLVED, True),  # the driver reloaded: the gauge reads 0
            (920, sample(xid=48), OPEN, False),  # a new error after the reset
        ]
    )


def test_nvml_events_fault_only_when_they_fire() -> None:
    play(
        [
            (0, node(), set(), True),
            (10, sample(xid=95, memory_used_mib=10.0), OPEN, False),
            (20, sample(memory_used_mib=10.0), set(), False),
            (300, sample(xid=95), set(), False),  # fired again (the last reading had none)
            (899, sample(memory_used_mib=10.0), set(), False),
            (900, sample(memory_used_mib=10.0), RESOLVED, True),
        ]
    )


def test_application_informational_and_unknown_xids_keep_the_card() -> None:
    play(
        [
            (0, node(), set(), True),
            (10, sample(xid=13), set(), True),  # one application's fault
            (20, sample(xid=43, xid_counts={43: 3}), set(), True),
            (30, sample(xid=63), set(), True),  # a retirement recorded for the next reset
            (40, sample(xid=999), set(), True),  # unknown: kept as last_xid, not taken out
        ]
    )


def test_uncordon_brings_the_card_back_and_the_stale_gauge_does_not_fault_it_again() -> None:
    p = play(
        [
            (0, node(), set(), True),
            (10, sample(xid=79), OPEN, False),
            (20, node(cordoned=True), set(), False),
            (60, node(cordoned=False), RESOLVED, True),  # the operator's word
            (70, sample(xid=79), set(), True),  # what was seen before the uncordon
            (80, sample(xid=74), OPEN, False),  # something new
        ]
    )
    assert p.join.node_profiles[NODE].gpus[0].last_xid == 74


def test_a_pending_row_remap_needs_a_reset_and_a_failed_one_service() -> None:
    play(
        [
            (0, node(), set(), True),
            (10, sample(row_remap_pending=True), OPEN, False),
            (700, sample(row_remap_pending=True), set(), False),  # still waits for a reset
            (710, sample(row_remap_pending=False), RESOLVED, True),
            (720, sample(row_remap_failed=True), OPEN, False),
            (1_500, sample(row_remap_failed=True), set(), False),
            (1_510, sample(row_remap_failed=False), RESOLVED, True),
        ]
    )


def test_uncorrectable_ecc_errors_count_when_they_rise() -> None:
    play(
        [
            (0, node(), set(), True),
            (10, sample(ecc_uncorrected_volatile=0), set(), True),
            (20, sample(ecc_uncorrected_volatile=2), OPEN, False),
            (500, sample(ecc_uncorrected_volatile=3), set(), False),  # one more: from 500 s
            (1_099, sample(ecc_uncorrected_volatile=3), set(), False),
            (1_100, sample(ecc_uncorrected_volatile=3), RESOLVED, True),
            (1_110, sample(ecc_uncorrected_volatile=0), set(), True),  # reset: the count drops
            (1_120, sample(ecc_uncorrected_volatile=1), OPEN, False),
        ]
    )


def test_the_signal_names_the_fault_its_meaning_and_the_pods_on_the_card() -> None:
    p = play([(0, node(), set(), True), (1, pod(), set(), True), (10, sample(xid=79), OPEN, False)])
    (sig,) = p.cluster.book.open.values()
    assert sig.evidence["xid"] == 79
    assert sig.evidence["xid_meaning"] == "GPU has fallen off the bus"
    assert sig.evidence["xid_class"] == "fatal"
    assert sig.evidence["pods"] == ["train/llm-0"]
    assert sig.evidence["since"] == at(10).isoformat()
    assert "1 pod(s)" in sig.summary
    # the card leaves capacity: only card 1 counts as free
    assert p.join.node_profiles[NODE].gpu_milli_free_total == 1000


def test_a_node_problem_condition_takes_all_its_cards_out_until_it_clears() -> None:
    npd = {"GpuUnhealthy": "XidError: kernel: NVRM: Xid (PCI:0000:3b:00): 79"}
    p = play(
        [
            (0, node(), set(), True),
            (10, node(problems=npd), {("open", NODE)}, False),
            (20, node(problems=npd), set(), False),
            (30, node(), {("resolved", NODE)}, True),
        ]
    )
    assert all(g.healthy for g in p.join.node_profiles[NODE].gpus)


def test_a_node_that_goes_away_resolves_its_cards() -> None:
    p = play([(0, node(), set(), True), (10, sample(xid=79), OPEN, False)])
    env = Envelope.wrap(
        node().model_copy(update={"change": "delete"}), event_time=at(20), source="test"
    )
    out = [s for u in p.join.apply(env) for s in p.cluster.apply(u)]
    assert [(s.state, s.scope_id) for s in out if s.kind == "gpu_unhealthy"] == [
        ("resolved", f"{NODE}/0")
    ]


def test_a_restarted_host_keeps_the_fault_and_its_recovery_time() -> None:
    p = define_pipeline(GpufragSettings()).build()
    p.join.restore({})  # hosts that persist their state record changes from here on
    p.cluster.restore({})
    play([(0, node(), set(), True), (10, sample(xid=79, xid_counts={79: 1}), OPEN, False)], p)
    joined, analysed = p.join.snapshot(), p.cluster.snapshot()
    q = define_pipeline(GpufragSettings()).build()
    q.join.restore({k: v for k, v in joined.items() if v is not None})
    q.cluster.restore({k: v for k, v in analysed.items() if v is not None})
    assert q.join.node_states[NODE].telemetry == p.join.node_states[NODE].telemetry
    assert list(q.cluster.book.open) == list(p.cluster.book.open)
    play(
        [
            (300, sample(xid=79, xid_counts={}), set(), False),
            (610, sample(xid=79, xid_counts={}), RESOLVED, True),
        ],
        q,
    )


def test_an_uncordon_is_not_undone_by_a_count_still_in_the_exporters_window() -> None:
    play(
        [
            (0, node(), set(), True),
            (10, sample(xid=79, xid_from="gauge", xid_counts={79: 1}), OPEN, False),
            (20, node(cordoned=True), set(), False),
            (100, node(cordoned=False), RESOLVED, True),
            (130, sample(xid=79, xid_from="gauge", xid_counts={79: 1}), set(), True),
            (140, sample(xid=79, xid_from="gauge", xid_counts={79: 2}), OPEN, False),  # fired
        ]
    )


def test_nvml_events_each_count_so_a_card_erring_on_every_poll_stays_out() -> None:
    rows: list[Row] = [
        (0, node(), set(), True),
        (10, sample(xid=48, xid_from="events"), OPEN, False),
    ]
    rows += [(t, sample(xid=48, xid_from="events"), set(), False) for t in range(70, 971, 60)]
    rows += [
        (1_000, sample(xid_from="events"), set(), False),  # 30 s after the last event
        (1_569, sample(xid_from="events"), set(), False),
        (1_570, sample(xid_from="events"), RESOLVED, True),
    ]
    play(rows)


def test_two_sources_on_one_card_do_not_make_the_stale_gauge_new_again() -> None:
    """dcgm-exporter without XID counts and the NVML sampler both read the card: NVML's
    readings without an event say nothing of the gauge, so its 79 stays the one seen; it
    also keeps the card out until the gauge clears, whichever source reads last."""
    play(
        [
            (0, node(), set(), True),
            (10, sample(xid=79, xid_from="gauge"), OPEN, False),
            *[
                (
                    t,
                    sample(xid=79, xid_from="gauge") if t % 60 else sample(xid_from="events"),
                    set(),
                    False,
                )
                for t in range(30, 1_500, 30)
            ],
            (1_500, sample(xid_from="gauge"), RESOLVED, True),  # the driver reloaded
            (1_530, sample(xid_from="events"), set(), True),
        ]
    )


def test_the_first_reading_is_the_ecc_baseline_also_after_the_node_comes_back() -> None:
    p = play(
        [
            (0, node(), set(), True),
            (10, sample(ecc_uncorrected_volatile=2), set(), True),  # since the driver loaded
            (20, sample(ecc_uncorrected_volatile=2), set(), True),
        ]
    )
    gone = Envelope.wrap(
        node().model_copy(update={"change": "delete"}), event_time=at(30), source="t"
    )
    feed(p, gone)
    play(
        [
            (40, node(), set(), True),
            (50, sample(ecc_uncorrected_volatile=2), set(), True),
            (60, sample(ecc_uncorrected_volatile=3), OPEN, False),
        ],
        p,
    )


def test_a_cpu_node_with_a_problem_condition_gets_no_gpu_signal() -> None:
    p = define_pipeline(GpufragSettings()).build()
    cpu = Node(name="cpu-0", cpu_milli=8_000, memory_mib=32_768, problems={"KernelDeadlock": "x"})
    env = Envelope.wrap(NodeEvent(change="upsert", node=cpu), event_time=at(0), source="test")
    assert [s for s in feed(p, env) if s.kind == "gpu_unhealthy"] == []
