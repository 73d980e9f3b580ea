"""A pod the cluster's free total cannot take, and no quota holds: no planner runs for it (it is
capacity, not fragmentation), and `gpufrag explain` says so in its fix section, in text and
``--json``, from the stored row, instead of "no plan stored"."""

from __future__ import annotations

import json
from pathlib import Path

from connectors.clickhouse.rows import GANG_COLUMNS, QUOTA_COLUMNS
from models import GpufragSettings
from streams.app.queries.pod_fixes import capacity_text
from tests.app.embedded_store import minute_apart, stored_run
from tests.app.pipeline_helpers import gpufrag
from tests.streams.quota_scenarios import gpu_node, gpu_pod

SHORT = (
    "no fix gpufrag plans: the cluster's free total is short of this request (it asks 2 GPUs, "
    "2000 mCPU, 4096 MiB; the free total can't cover it): that is capacity, not "
    "fragmentation; kube-scheduler's own preemption frees room for higher priorities"
)


def test_explain_says_a_full_cluster_is_capacity_not_a_missing_plan(tmp_path: Path) -> None:
    # 4 GPUs, all taken by lower-priority pods: the 2-GPU pod fits neither a node nor the total
    steps = [
        [
            gpu_node("gpu-1", 4),
            gpu_pod("low-0", "ml", gpus=2, on="gpu-1", priority=0),
            gpu_pod("low-1", "ml", gpus=2, on="gpu-1", priority=0),
        ],
        [gpu_pod("big", "ml", gpus=2, priority=100)],
        [gpu_pod("notebook", "lab", gpus=0, priority=0)],
    ]
    config = GpufragSettings()
    assert config.guardrails.mode == "dry-run"
    dsn = stored_run(tmp_path, minute_apart(steps), run_id="run-full", config=config)
    out = gpufrag(dsn, "explain", "ml/big")
    assert out.returncode == 0, out.stderr
    text = " ".join(out.stdout.split())
    assert "(the cluster is full)" in text
    assert SHORT in text
    assert "no plan stored" not in text
    as_json = gpufrag(dsn, "explain", "ml/big", "--json")
    assert as_json.returncode == 0, as_json.stderr
    doc = json.loads(as_json.stdout)
    assert (doc["fits_cluster_total"], doc["unplaceable"]) == (0, 0)
    assert doc["fixes"] == [] and doc["no_fix"] is None
    assert doc["capacity_shortage"] == SHORT


def _row(**columns: object) -> dict[str, object]:
    base: dict[str, object] = {
        "fits_cluster_total": 0,
        "fits_some_node": 0,
        "unplaceable": 0,
        "reasons": {"gpu_count": 1},
        "gpu_count": 1,
        "gpu_milli": 500,
        "mig": {},
        "cpu_milli": 1000,
        "memory_mib": 2048,
    }
    return {**base, **dict.fromkeys(QUOTA_COLUMNS), **dict.fromkeys(GANG_COLUMNS), **columns}


def test_the_words_come_from_the_row_and_only_for_a_full_cluster_nothing_else_holds() -> None:
    assert "(it asks 1 x 500 milli-GPU, 1000 mCPU, 2048 MiB;" in str(capacity_text(_row()))
    gang = capacity_text(_row(gang="llm", gang_needed=2, gang_member_shown="ml/llm-w0"))
    assert "(it needs 2 members at once, ml/llm-w0 asking 1 x 500 milli-GPU, " in str(gang)
    # fits the total (fragmentation, or waiting for the scheduler): planners speak for it
    assert capacity_text(_row(fits_cluster_total=1, unplaceable=1)) is None
    # held by its queue too: the quota's planner speaks for it
    assert capacity_text(_row(quota_blocker="VolcanoQueue:serve")) is None
    assert capacity_text(_row(reasons={"quota": 1, "gpu_count": 1})) is None
