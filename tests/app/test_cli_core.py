"""The planner commands, run as a user runs them: a subprocess with real files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


def gpufrag(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "streams.app", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_frag_json_on_bundled_trace() -> None:
    out = gpufrag("frag", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert set(data) >= {"frag_amount_pct", "frag_ratio_pct", "typical_pods"}
    assert data["frag_amount_pct"] == data["frag_ratio_pct"]  # empty cluster: idle == all
    assert data["typical_pods"] == 35
    assert data["gpus"] == 6212


def test_experiment_json_has_equal_length_lists(trace_dir: Path) -> None:
    out = gpufrag(
        "experiment",
        "--pods",
        str(trace_dir / "openb_pod_list_multigpu20.csv"),
        "--policy",
        "best-fit",
        "--seeds",
        "7",
        "--json",
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    lengths = {
        len(data[k]) for k in ("arrived_pct", "alloc_pct", "frag_amount_pct", "frag_ratio_pct")
    }
    assert lengths == {131}
    assert data["alloc_pct"][130] > data["alloc_pct"][50] > 0


def test_experiment_prints_published_beside_ours(published_dir: Path) -> None:
    out = gpufrag(
        "experiment",
        "--policy",
        "fgd",
        "--seeds",
        "42",
        "--published",
        str(published_dir),
        "--every",
        "50",
    )
    assert out.returncode == 0, out.stderr
    assert "published" in out.stdout and "diff" in out.stdout
    assert out.stdout.count("\n│") >= 3  # levels 0, 50, 100 (+130)


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (
            "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1000,10,1,1.5\n",
            "bad.csv:2: column 'gpu_milli'",
        ),
        (
            "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,-5,10,0,0\n",
            "bad.csv:2: column 'cpu_milli'",
        ),
        (
            "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1000,,0,0\n",
            "bad.csv:2: column 'memory_mib'",
        ),
        (
            "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
            "deletion_time,scheduled_time\np0,1000,10,1,1000,X999,LS,Running,0,5,0\n",
            "bad.csv:2: column 'gpu_spec'",
        ),
    ],
)
def test_bad_pod_csv_gives_one_line_naming_file_line_column(
    tmp_path: Path, content: str, needle: str
) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text(content)
    out = gpufrag("frag", "--pods", str(bad))
    assert out.returncode == 2
    assert needle in out.stderr
    assert "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_missing_file_and_unknown_policy_are_clear(tmp_path: Path) -> None:
    out = gpufrag("frag", "--pods", str(tmp_path / "nope.csv"))
    assert out.returncode == 2 and "file not found" in out.stderr
    assert "Traceback" not in out.stderr
    out = gpufrag("experiment", "--policy", "tetris", "--seeds", "1")
    assert out.returncode == 2 and "unknown policy 'tetris'" in out.stderr
    out = gpufrag("experiment", "--policy", "fgd", "--seeds", "5-1")
    assert out.returncode == 2 and "not a seed list" in out.stderr
