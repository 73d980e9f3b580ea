"""`gpufrag bench` run as a user runs it: the table, the JSON file's shape, refusals. No
figure is checked, only that each was measured: timings vary with the machine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.bench.figure_keys import FIGURE_KEYS


def _bench(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "GPUFRAG_KAFKA__BOOTSTRAP"}
    return subprocess.run(
        [sys.executable, "-m", "streams.app", "bench", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        check=False,
    )


def test_small_cli_and_view_write_one_object_per_figure(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    done = _bench(
        "--scale", "small", "--case", "cli", "--case", "view", "--case", "kafka", "--json", str(out)
    )
    assert done.returncode == 0, done.stderr
    body = json.loads(out.read_text())
    assert body["meta"]["scale"] == "small" and body["meta"]["cases"] == ["cli", "view", "kafka"]
    figures = body["cases"]
    assert all(set(f) == FIGURE_KEYS for f in figures)
    names = [(f["case"], f["figure"]) for f in figures]
    assert names == [
        ("cli", "help_s"),
        ("cli", "sql_list_s"),
        ("view", "full_evaluation_s@100"),
        ("view", "change_us@100"),
        ("view", "full_evaluation_s@1000"),
        ("view", "change_us@1000"),
        ("kafka", "events_per_s"),
    ]
    measured = figures[:-1]
    for f in measured:
        assert f["runs"] == 3 and f["min"] <= f["median"] <= f["max"], f
        assert f["baseline_median"] > 0 and f["ratio"] == f["median"] / f["baseline_median"]
        assert f["target"] and isinstance(f["met"], bool)
    kafka = figures[-1]
    assert kafka["median"] is None and kafka["met"] is None
    assert kafka["note"].startswith("not run: no broker given")
    # the table names every figure, and the kafka case as not run
    for _, figure in names:
        assert figure in done.stdout
    assert "not run" in done.stdout


def test_an_unknown_case_is_refused_in_one_line_before_anything_runs(tmp_path: Path) -> None:
    done = _bench("--case", "replya", "--json", str(tmp_path / "x.json"))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "gpufrag: error: unknown case replya; the cases are: cli, view, experiment, ingest, "
        "sink, extender, memory, inspect, replay, kafka, latency"
    ]
    assert not (tmp_path / "x.json").exists()
