"""`--skip-bad-rows`: the run goes on without the refused trace rows, says how many there were,
and a replay keeps each of them in the store's dead_letter table (why, and the line as read)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.app.pipeline_helpers import count, dsn_for, gpufrag, store_at
from tests.paths import TRACE_DIR

ABSURD_NODE = "absurd,96000,393216,1000000000,G2"
BAD_CPU = "bad-cpu,99999999999,8192,1,500,,LS,Running,10,20,11"
BAD_QOS = "bad-qos,4000,8192,1,500,,Platinum,Running,10,20,11"


def _head(path: Path, rows: int) -> list[str]:
    with path.open(encoding="utf-8") as f:
        return [next(f).rstrip("\n") for _ in range(rows + 1)]


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("trace")
    nodes, pods = d / "nodes.csv", d / "pods.csv"
    node_rows = _head(TRACE_DIR / "openb_node_list_gpu_node.csv", 20)
    pod_rows = _head(TRACE_DIR / "openb_pod_list_default.csv", 200)
    nodes.write_text("\n".join([*node_rows[:5], ABSURD_NODE, *node_rows[5:]]) + "\n")
    pods.write_text("\n".join([*pod_rows, BAD_CPU, BAD_QOS]) + "\n")
    return nodes, pods


def test_replay_keeps_refused_rows_as_dead_letters(
    trace: tuple[Path, Path], tmp_path: Path
) -> None:
    nodes, pods = trace
    dsn = dsn_for(tmp_path / "store")
    args = ("replay", "--mode", "timeline", "--nodes", str(nodes), "--pods", str(pods))
    out = gpufrag(dsn, *args, "--skip-bad-rows", "--json", timeout=120)
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    assert summary["status"] == "finished"
    assert summary["refused_rows"] == 3
    assert (summary["nodes"], summary["pods"]) == (20, 200)
    with store_at(dsn) as st:
        rows = st.query("SELECT target, reason, row FROM dead_letter FINAL ORDER BY row").rows
        runs = st.query("SELECT DISTINCT run_id FROM dead_letter FINAL").rows
    assert [(str(r),) for (r,) in runs] == [(summary["run_id"],)]  # filed under the replay
    assert [(str(t), str(r).split(":", 1)[0], str(raw)) for t, r, raw in rows] == [
        ("source:trace", "out_of_range", ABSURD_NODE),
        ("source:trace", "out_of_range", BAD_CPU),
        ("source:trace", "unknown_qos", BAD_QOS),
    ]
    reasons = sorted(str(r) for _, r, _ in rows)
    assert reasons[0] == (f"out_of_range: {nodes}:6: column 'gpu': 1000000000 outside 0..64")
    # the table summary says it too, and the same replay again keeps one row per refusal
    again = gpufrag(dsn, *args, "--skip-bad-rows", timeout=120)
    assert again.returncode == 0, again.stderr
    assert "trace rows refused (in dead_letter)" in again.stdout
    with store_at(dsn) as st:
        assert count(st, "dead_letter", final=True) == 3
    # without the option the same trace stops before the run, and says why
    refused = gpufrag(dsn, *args, timeout=120)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 3  # one per file and reason


def test_experiment_runs_without_refused_rows(trace: tuple[Path, Path], tmp_path: Path) -> None:
    nodes, pods = trace
    out = gpufrag(
        dsn_for(tmp_path / "unused"),
        *("experiment", "--policy", "fgd", "--seeds", "1"),
        *("--nodes", str(nodes), "--pods", str(pods), "--skip-bad-rows", "--json"),
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["refused_rows"] == 3
    assert result["pods_arrived_per_seed"] > 0
