"""`gpufrag sink`'s history records: input events, profile deltas and cluster reports become
the rows the embedded runner stores, and reading them again adds no row."""

from __future__ import annotations

import asyncio

import orjson

from connectors.clickhouse import Store
from models import to_json
from models.analysis import (
    BlockReason,
    Explanation,
    InstantReport,
    NearMiss,
    QuotaBlock,
)
from models.progress import SourceProgress
from streams.app.sinks.topic_history import TELEMETRY_SEQ, HistoryRows
from streams.app.sinks.topic_sink import TopicSink
from streams.distributed.codec import decode_report, encode, encode_progress, encode_report
from streams.instants import OrderKey
from streams.profiles.join import NodeProfileUpdate, PeakReport, TaskProfileUpdate
from tests.connectors.clickhouse.bus_fakes import TP, Consumer, Record
from tests.connectors.clickhouse.factories import (
    SUMMARY,
    at,
    gpu_sample_env,
    node_profile,
    task_profile,
)
from tests.connectors.clickhouse.helpers import SinkMaker


def report() -> InstantReport:
    exp = Explanation(
        fits_cluster_total=True,
        fits_some_node=False,
        blocking=((BlockReason.GPU_SHARE, 2), (BlockReason.CPU, 1)),
        near_misses=(NearMiss("gpu-node-1", (BlockReason.GPU_SHARE,), 0, 0, 1),),
        nodes_checked=2,
        quota=("ClusterQueue:team-a",),
        quota_blocks=(
            QuotaBlock("ClusterQueue:team-a", "nvidia.com/gpu", 2.0, 4.0, 4.0, None, 0.0),
        ),
    )
    pending = task_profile("ml/waits", bound=False)
    return InstantReport(at=at(3), summary=SUMMARY, explanations={"ml/waits": (exp, pending)})


ORDER = OrderKey(at(1), 1, "kube", "e1")
PEAK_ORDER = OrderKey(at(1), 2, "dcgm", "s1", rank=1)


def batches() -> list[dict[TP, list[Record]]]:
    order = ORDER
    deltas = [
        encode(NodeProfileUpdate("gpu-node-1", node_profile(), at(1)), order=order),
        encode(TaskProfileUpdate("ml/job-1", task_profile(), at(1)), order=order),
        encode_progress(SourceProgress(source="nodes/0", upto=at(1), kinds=())),
        encode(TaskProfileUpdate("ml/job-1", None, at(2)), order=None),  # the pod was deleted
        # a new memory peak, made by the node's stage beside its profile
        encode(PeakReport("ml/job-1", "gpu-node-1", 9_000.0, at(1)), order=PEAK_ORDER),
    ]
    progress = encode_progress(SourceProgress(source="dcgm", upto=at(1), kinds=()))
    return [
        {
            TP("p.samples", 4): [
                Record(0, 0, to_json(gpu_sample_env(1))),
                Record(1, 0, progress),
                Record(2, 0, b"{broken"),
            ],
            TP("p.deltas", 0): [Record(n, 0, raw) for n, raw in enumerate(deltas)],
        },
        {TP("p.reports", 0): [Record(0, 0, encode_report(report()))]},
    ]


async def sink_once(make_sink: SinkMaker) -> HistoryRows:
    stop = asyncio.Event()
    sink = make_sink()
    await sink.start()
    history = HistoryRows(
        run_id="live", inputs=frozenset({"p.samples"}), deltas="p.deltas", reports="p.reports"
    )
    out = TopicSink(
        consumer=Consumer(batches(), stop),
        sink=sink,
        run_id="live",
        signals_topic="p.signals",
        dead_letter_topic="p.dlq",
        history=history,
    )
    await out.run(stop)
    await sink.flush()
    return history


TABLES = (
    "events",
    "gpu_samples",
    "node_profiles",
    "task_profiles",
    "task_memory_peaks",
    "cluster_frag",
)


def count(store: Store, table: str, *, final: bool = False) -> int:
    rows = store.query(f"SELECT count() FROM {table}{' FINAL' if final else ''}").rows
    return int(str(rows[0][0]))


def test_a_report_survives_its_codec() -> None:
    assert decode_report(encode_report(report())) == report()
    empty = InstantReport(at=at(0), summary=SUMMARY)
    assert decode_report(encode_report(empty)) == empty


def test_a_report_of_the_previous_version_without_quota_figures_still_decodes() -> None:
    body = orjson.loads(encode_report(report()))
    exp = body["explanations"]["ml/waits"][0]
    del exp["quota_blocks"]  # a worker not yet upgraded knows only the keys
    older = decode_report(orjson.dumps(body)).explanations
    assert older is not None
    exp, _ = older["ml/waits"]
    assert exp.quota == ("ClusterQueue:team-a",) and exp.quota_blocks == ()


async def test_history_records_become_the_embedded_runners_rows_once(
    make_sink: SinkMaker, store: Store
) -> None:
    history = await sink_once(make_sink)
    assert history.counts == {
        "events": 1,
        "node_profiles": 1,
        "task_profiles": 2,
        "task_memory_peaks": 1,
        "cluster_reports": 1,
        "skipped": 3,  # two progress reports and the broken record
    }
    (ev,) = store.query("SELECT kind, key FROM events").rows
    assert tuple(ev) == ("gpu_sample", "gpu-node-1")
    assert count(store, "gpu_samples") == 1
    tasks = store.query("SELECT pod, seq, removed FROM task_profiles ORDER BY seq").rows
    # seq: the delta's place in the source order, the key the embedded runner gives it; the
    # deletion came with no order: the instant's last
    placed = ORDER.row_seq()
    assert [tuple(r) for r in tasks] == [("ml/job-1", placed, 0), ("ml/job-1", TELEMETRY_SEQ, 1)]
    (node,) = store.query("SELECT node, seq FROM node_profiles").rows
    assert tuple(node) == ("gpu-node-1", placed)
    (peak,) = store.query("SELECT pod, node, seq, used_mib FROM task_memory_peaks").rows
    assert tuple(peak) == ("ml/job-1", "gpu-node-1", PEAK_ORDER.row_seq(), 9_000.0)
    (frag,) = store.query("SELECT ts, frag_amount_pct, pending_pods FROM cluster_frag").rows
    assert (frag[1], frag[2]) == (18.75, 1)
    (exp,) = store.query("SELECT pod, unplaceable, reasons FROM pending_explanations").rows
    assert (exp[0], exp[1]) == ("ml/waits", 1)
    assert dict(exp[2]) == {"gpu_share": 2, "cpu": 1}
    # the quota holding the pod, as the embedded runner writes it (one explanation_row)
    (held,) = store.query(
        "SELECT quota_blocker, quota_used, quota_nominal, quota_limit, quota_room "
        "FROM pending_explanations"
    ).rows
    assert tuple(held) == ("ClusterQueue:team-a", 4.0, 4.0, None, 0.0)

    tables = (*TABLES, "pending_explanations")
    first = {table: count(store, table) for table in tables}
    await sink_once(make_sink)  # the same records again: a restart, a new group
    # every row read again landed on its key: the deduplicated table is what it was
    assert {table: count(store, table, final=True) for table in tables} == first
