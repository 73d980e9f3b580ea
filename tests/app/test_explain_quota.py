"""A pod held by its queue, end to end: real-shaped Volcano and Kueue objects through the
embedded runner into a chDB store, then `gpufrag explain` (text and ``--json``) reading the
stored row, and the queue's `quota_exhausted` signal in the store, opened and resolved."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from connectors.clickhouse.rows import QUOTA_COLUMNS
from streams.app.queries.explained_row import quota_text, verdict
from tests.app.pipeline_helpers import gpufrag, stored_signals
from tests.app.scripted_runs import stored_run
from tests.streams.quota_scenarios import (
    CQ_SOLO,
    VQ_SERVE,
    full_cluster_queue_steps,
    full_volcano_steps,
)

CASES = {
    "volcano": (full_volcano_steps, "web/api-1", VQ_SERVE, "(capability 4)"),
    "kueue": (full_cluster_queue_steps, "ml/infer-1", CQ_SOLO, "(nominal quota 4)"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_pod_its_full_queue_holds_is_explained_from_the_stored_row(
    tmp_path: Path, case: str
) -> None:
    steps, pod, queue, terms = CASES[case]
    # the run ends when the pod is admitted: its last stored explanation is the held one
    dsn = stored_run(tmp_path, steps(), run_id="run-quota")
    out = gpufrag(dsn, "explain", pod)
    assert out.returncode == 0, out.stderr
    text = " ".join(out.stdout.split())
    assert f"blocked by {queue}: 4 of 4 GPUs used {terms}" in text
    assert "the pod asks 2, it has room for 0" in text
    assert f"held by quota: a node could take it now, but {queue} has no room" in text
    assert "waiting for the scheduler" not in text
    as_json = gpufrag(dsn, "explain", pod, "--json")
    assert as_json.returncode == 0, as_json.stderr
    doc = json.loads(as_json.stdout)
    assert doc["fits_some_node"] == 1 and doc["held_by_quota"] is True
    kind, name = queue.split(":")
    assert doc["quota"] == {
        "blocker": queue,
        "kind": kind,
        "name": name,
        "resource": "nvidia.com/gpu",
        "requested": 2.0,
        "used": 4.0,
        "nominal": 4.0,
        "limit": 4.0,
        "room": 0.0,
        "text": doc["quota"]["text"],
    }
    assert doc["quota"]["text"].startswith(f"blocked by {queue}: 4 of 4 GPUs used {terms}")
    assert "waiting for the scheduler" not in doc["verdict"]
    signals = [s for s in stored_signals(dsn) if s["kind"] == "quota_exhausted"]
    assert [(s["scope_id"], s["state"]) for s in signals] == [
        (queue, "open"),
        (queue, "resolved"),
    ]
    evidence = json.loads(str(signals[0]["evidence"]))
    assert (evidence["used"], evidence["ceiling"]) == ({"nvidia.com/gpu": 4.0}, 4.0)


def _row(**columns: object) -> dict[str, object]:
    base: dict[str, object] = {"unplaceable": 0, "fits_some_node": 1, "reasons": {}}
    return {**base, **dict.fromkeys(QUOTA_COLUMNS), **columns}


def test_only_a_pod_nothing_holds_is_said_to_wait_for_the_scheduler() -> None:
    assert verdict(_row()) == "fits a node now; it was waiting for the scheduler"
    # a row stored before migration 016: no blocker named, `quota` among its reasons
    older = verdict(_row(reasons={"quota": 3}))
    assert older.startswith("held by quota") and "its queue or quota has no room" in older
    full = verdict(_row(fits_some_node=0, reasons={"quota": 3, "gpu_count": 3}))
    assert full.endswith("(the cluster is full), and its queue or quota has no room for it either")


def test_a_borrowing_limit_and_a_missing_ceiling_in_the_queues_own_words() -> None:
    kueue = {"quota_resource": "nvidia.com/gpu", "quota_requested": 4.0, "quota_room": 2.0}
    limited = _row(
        quota_blocker="ClusterQueue:b",
        quota_used=10.0,
        quota_nominal=8.0,
        quota_limit=12.0,
        **kueue,
    )
    assert quota_text(limited) == (
        "blocked by ClusterQueue:b: 10 of 12 GPUs used (nominal quota 8, borrowing limit 4); "
        "the pod asks 4, it has room for 2"
    )
    open_ended = _row(quota_blocker="ClusterQueue:b", quota_used=8.0, quota_nominal=8.0, **kueue)
    assert (
        "8 of 8 GPUs used (nominal quota 8, no borrowing limit: its cohort has none free)"
        in str(quota_text(open_ended))
    )
