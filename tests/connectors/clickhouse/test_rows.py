"""Row converters against the real tables: every column round-trips, duplicates collapse."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import orjson
import pytest

from connectors.clickhouse import Store
from connectors.clickhouse.rows import (
    EPOCH,
    Row,
    action_row,
    event_row,
    explanation_row,
    gpu_sample_row,
    node_profile_row,
    signal_row,
    task_profile_row,
)
from models import (
    Envelope,
    NodeEvent,
    NodeProfile,
    PodPhase,
    ResourceRequest,
    TaskProfile,
    from_json,
)
from models.analysis import BlockReason, Explanation, SchedulerCheck
from models.node import Node
from models.scheduler import PendingVerdict
from tests.connectors.clickhouse import factories as f
from tests.connectors.clickhouse.helpers import count

RUN = "run-1"
INGESTED = datetime.now(UTC).replace(microsecond=0)


def _events() -> list[Row]:
    node_env = Envelope.wrap(
        NodeEvent(change="upsert", node=Node(name="n1", cpu_milli=1000, memory_mib=2048)),
        event_time=f.at(3),
        source="kube",
    )
    envs = [f.gpu_sample_env(1), f.gpu_sample_env(2), node_env]
    # Recent: the table's TTL drops rows ingested over 30 days ago when parts merge.
    return [event_row(RUN, env, ingested_at=INGESTED) for env in envs]


def _gpu_samples() -> list[Row]:
    return [gpu_sample_row(RUN, f.gpu_sample_env(i)) for i in range(6)]


def _node_profiles() -> list[Row]:
    return [
        node_profile_row(RUN, "gpu-node-1", f.node_profile(), at=f.at(1), seq=0),
        node_profile_row(RUN, "gpu-node-1", f.node_profile(), at=f.at(1), seq=1),
        node_profile_row(RUN, "gpu-node-1", None, at=f.at(9), seq=0),
    ]


def _task_profiles() -> list[Row]:
    return [
        task_profile_row(RUN, "ml/job-1", f.task_profile(bound=False), at=f.at(0), seq=0),
        task_profile_row(RUN, "ml/job-1", f.task_profile(), at=f.at(42.5), seq=0),
        task_profile_row(RUN, "ml/job-1", None, at=f.at(99), seq=0),
    ]


def _signals() -> list[Row]:
    return [signal_row(RUN, f.signal(0)), signal_row(RUN, f.signal(0, resolved=True))]


def _actions() -> list[Row]:
    return [action_row(RUN, f.action(0)), action_row(RUN, f.action(1))]


TABLES: dict[str, tuple[Callable[[], list[Row]], str]] = {
    "events": (_events, "run_id, kind, key, event_time, id"),
    "gpu_samples": (_gpu_samples, "run_id, node, gpu_index, ts, event_id"),
    "node_profiles": (_node_profiles, "run_id, node, ts, seq"),
    "task_profiles": (_task_profiles, "run_id, pod, ts, seq"),
    "signals": (_signals, "run_id, fingerprint, opened_at, state"),
    "actions": (_actions, "run_id, id"),
}


def _read(store: Store, table: str, order: str, *, final: bool = True) -> list[dict[str, object]]:
    suffix = " FINAL" if final else ""
    return store.query(f"SELECT * FROM {table}{suffix} ORDER BY {order}").dicts()


def _sorted(rows: list[Row], order: str) -> list[Row]:
    keys = [k.strip() for k in order.split(",")]
    return sorted(rows, key=lambda r: tuple(str(r[k]) for k in keys))


@pytest.mark.parametrize("table", list(TABLES))
def test_rows_round_trip(store: Store, table: str) -> None:
    build, order = TABLES[table]
    rows = build()
    columns = store.query(f"SELECT * FROM {table} LIMIT 0").columns
    assert list(rows[0]) == columns, "converter keys must match the DDL, in order"
    store.insert(table, rows)
    assert _read(store, table, order) == _sorted(rows, order)


@pytest.mark.parametrize("table", list(TABLES))
def test_duplicate_writes_leave_one_row_per_key(store: Store, table: str) -> None:
    build, order = TABLES[table]
    rows = build()
    store.insert(table, rows)
    store.insert(table, build())  # a redelivery rebuilds equal rows
    store.insert(table, list(reversed(build())))
    assert count(store, table) == 3 * len(rows)  # before merging, all parts are there ...
    assert count(store, table, final=True) == len(rows)  # ... FINAL collapses them ...
    store.command(f"OPTIMIZE TABLE {table} FINAL")
    assert count(store, table) == len(rows)  # ... and so does the merge.
    assert _read(store, table, order, final=False) == _sorted(rows, order)


def test_profiles_json_parses_back_to_the_model() -> None:
    node = node_profile_row(RUN, "gpu-node-1", f.node_profile(), at=f.at(1), seq=0)
    assert from_json(NodeProfile, str(node["profile"])) == f.node_profile()
    task = task_profile_row(RUN, "ml/job-1", f.task_profile(), at=f.at(1), seq=0)
    assert from_json(TaskProfile, str(task["profile"])) == f.task_profile()


def test_derived_columns() -> None:
    node = node_profile_row(RUN, "gpu-node-1", f.node_profile(), at=f.at(1), seq=3)
    # 1000 + 500 free on healthy cards; the unhealthy card's share does not count.
    assert (node["gpus"], node["gpu_milli_free"], node["gpus_full_free"]) == (3, 1500, 1)
    assert (node["cpu_milli_free"], node["memory_mib_free"]) == (56_000, 0)
    assert (node["unschedulable"], node["pods"], node["removed"]) == (1, 2, 0)
    task = task_profile_row(RUN, "ml/job-1", f.task_profile(), at=f.at(1), seq=0)
    assert (task["namespace"], task["wait_s"], task["gpu_milli"]) == ("ml", 42.5, 500)
    pending = task_profile_row(RUN, "ml/job-1", f.task_profile(bound=False), at=f.at(1), seq=0)
    assert pending["wait_s"] is None and pending["bound_at"] is None
    opened, resolved = _signals()
    assert opened["ts"] == f.at(0) and resolved["ts"] == f.at(90)
    assert orjson.loads(str(opened["evidence"]))["kills"] == 7
    assert str(opened["evidence"]).startswith('{"aggressor":null,"kills"')  # sorted keys


def test_removed_rows() -> None:
    node = node_profile_row(RUN, "n1", None, at=f.at(1), seq=0)
    assert (node["removed"], node["profile"], node["pool"], node["gpus"]) == (1, "null", None, 0)
    task = task_profile_row(RUN, "ml/p", None, at=f.at(1), seq=0)
    assert (task["removed"], task["profile"], task["namespace"]) == (1, "null", "ml")
    assert task["created_at"] == EPOCH and task["phase"] == ""


def test_bad_inputs_are_refused() -> None:
    env = Envelope.wrap(
        NodeEvent(change="delete", node=Node(name="n1", cpu_milli=1, memory_mib=1)),
        event_time=f.at(0),
        source="kube",
    )
    with pytest.raises(TypeError, match="needs a gpu_sample envelope"):
        gpu_sample_row(RUN, env)
    with pytest.raises(ValueError, match="timezone-aware"):
        node_profile_row(RUN, "n1", None, at=datetime(2024, 1, 1), seq=0)
    with pytest.raises(ValueError, match="got the profile of 'gpu-node-1'"):
        node_profile_row(RUN, "other", f.node_profile(), at=f.at(0), seq=0)
    with pytest.raises(ValueError, match="is not 'namespace/name'"):
        task_profile_row(RUN, "no-namespace", None, at=f.at(0), seq=0)


def test_a_pending_explanation_keeps_what_the_pod_asks_of_shared_cards(store: Store) -> None:
    at = datetime(2026, 12, 2, tzinfo=UTC)
    task = TaskProfile(
        key="research/big-eval-0",
        uid="u",
        requests=ResourceRequest(cpu_milli=1_000, memory_mib=1_024, mig={"7g.80gb": 1}),
        phase=PodPhase.PENDING,
        created_at=at,
    )
    exp = Explanation(
        fits_cluster_total=False,
        fits_some_node=False,
        blocking=((BlockReason.GPU_COUNT, 3), (BlockReason.MIG_PROFILE, 1)),
        near_misses=(),
        nodes_checked=4,
    )
    store.insert("pending_explanations", [explanation_row("r1", task.key, exp, task, at)])
    (row,) = store.query("SELECT mig, gpu_memory_mib, reasons FROM pending_explanations").dicts()
    assert row == {
        "mig": {"7g.80gb": 1},
        "gpu_memory_mib": None,
        "reasons": {"gpu_count": 3, "mig_profile": 1},
    }


DISAGREE = "the scheduler says taint on 4 of 6 nodes; gpufrag's reasons: gpu_count"


def test_a_pending_explanation_shows_the_schedulers_verdict_beside_gpufrags(
    store: Store,
) -> None:
    at = datetime(2026, 12, 2, tzinfo=UTC)
    task = TaskProfile(
        key="ml/train-0",
        uid="u",
        requests=ResourceRequest(cpu_milli=1_000, memory_mib=1_024, gpu_count=1, gpu_milli=1000),
        phase=PodPhase.PENDING,
        created_at=at,
    )
    theirs = PendingVerdict(at=at, nodes=6, reasons={"taint": 4, "gpu_count": 2})
    exp = Explanation(
        fits_cluster_total=True,
        fits_some_node=False,
        blocking=((BlockReason.GPU_COUNT, 6),),
        near_misses=(),
        nodes_checked=6,
        scheduler=SchedulerCheck(
            verdict=theirs,
            agrees=False,
            reason=BlockReason.TAINT,
            disagreement=DISAGREE,
        ),
    )
    unread = PendingVerdict(at=at, message="0/3 nodes are unavailable: 3 Insufficient cpu.")
    other = Explanation(
        fits_cluster_total=True,
        fits_some_node=False,
        blocking=((BlockReason.CPU, 3),),
        near_misses=(),
        nodes_checked=3,
        scheduler=SchedulerCheck(verdict=unread, agrees=None, reason=None),
    )
    rows = [
        explanation_row("r1", task.key, exp, task, at),
        explanation_row("r1", "ml/other", other, task, at),
    ]
    store.insert("pending_explanations", rows)
    got = store.query(
        "SELECT pod, reasons, scheduler_at, scheduler_nodes, scheduler_reasons, scheduler_message,"
        " agrees, disagreement FROM pending_explanations ORDER BY pod"
    ).dicts()
    assert got == [
        {
            "pod": "ml/other",
            "reasons": {"cpu": 3},
            "scheduler_at": at,
            "scheduler_nodes": None,
            "scheduler_reasons": {},
            "scheduler_message": "0/3 nodes are unavailable: 3 Insufficient cpu.",
            "agrees": None,
            "disagreement": "",
        },
        {
            "pod": "ml/train-0",
            "reasons": {"gpu_count": 6},
            "scheduler_at": at,
            "scheduler_nodes": 6,
            "scheduler_reasons": {"taint": 4, "gpu_count": 2},
            "scheduler_message": None,
            "agrees": 0,
            "disagreement": DISAGREE,
        },
    ]
