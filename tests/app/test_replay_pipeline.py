"""`gpufrag replay` end to end on a reduced real trace, checked against the operators."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from matplotlib.image import imread

from tests.app.headless_chromium import chromium
from tests.app.pipeline_helpers import (
    as_keys,
    count,
    dsn_for,
    gpufrag,
    gpufrag_env,
    store_at,
    stored_keys,
    stored_signals,
)
from tests.app.reference_replay import NODE_LIMIT, operator_signals

TABLES = (
    "events",
    "node_profiles",
    "task_profiles",
    "signals",
    "pending_explanations",
    "cluster_frag",
    "runs",
)


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> str:
    dsn = dsn_for(tmp_path_factory.mktemp("store") / "st")
    out = gpufrag(dsn, "replay", "--node-limit", str(NODE_LIMIT))
    assert out.returncode == 0, out.stderr
    assert "gpufrag replay" in out.stdout and "finished" in out.stdout
    return dsn


def test_stored_signals_equal_the_operators_signals(replayed: str) -> None:
    ours = as_keys(operator_signals())
    assert len(ours) > 10
    assert stored_keys(stored_signals(replayed)) == ours


def test_stored_rows_match_the_run(replayed: str) -> None:
    with store_at(replayed) as st:
        res = st.query("SELECT status, summary FROM runs FINAL")
        assert len(res.rows) == 1
        status, summary_text = res.rows[0]
        summary = json.loads(str(summary_text))
        assert status == "finished"
        assert count(st, "events") == summary["events"]
        assert count(st, "task_profiles", final=True) >= summary["pods"]
        assert count(st, "dead_letter") == 0
        last = st.query(
            "SELECT frag_amount_pct FROM cluster_frag FINAL ORDER BY ts DESC LIMIT 1"
        ).rows[0][0]
        assert last == pytest.approx(summary["frag_amount_pct"], abs=1e-3)


def test_every_stored_explanation_of_a_pod_the_scheduler_failed_carries_its_verdict(
    replayed: str,
) -> None:
    """Under the FGD protocol the scheduler's verdict comes half a second after the pod was
    seen pending, in the instant it is dropped: it is joined to the stored explanation all the
    same (before, none of them had it), on the explanation's own row."""
    with store_at(replayed) as st:
        failed, explained, joined, late = st.query(
            """
            SELECT uniqExact(e.key), count(), countIf(x.scheduler_at IS NOT NULL),
                   countIf(x.scheduler_at > x.ts)
            FROM pending_explanations AS x FINAL
            LEFT JOIN (SELECT DISTINCT key FROM events WHERE kind = 'scheduler') AS e
                ON e.key = x.pod
            WHERE e.key != ''
            """
        ).rows[0]
    assert failed >= 3 and explained >= failed, (failed, explained, joined, late)
    assert joined == explained and late == joined, (failed, explained, joined, late)


def test_every_named_query_answers_and_report_renders(replayed: str, tmp_path: Path) -> None:
    listed = gpufrag(replayed, "sql", "--list")
    names = [ln.split()[0] for ln in listed.stdout.splitlines() if ln and not ln.startswith(" ")]
    assert len(names) == 6
    for name in names:
        out = gpufrag(replayed, "sql", name, "--format", "json")
        assert out.returncode == 0, (name, out.stderr)
        assert isinstance(json.loads(out.stdout), list)
    rows = json.loads(
        gpufrag(replayed, "sql", "fragmentation_over_time", "--format", "json").stdout
    )
    assert rows and {"minute", "frag_ratio_pct", "alloc_pct"} <= set(rows[0])
    page = tmp_path / "r.html"
    out = gpufrag(replayed, "report", "--out", str(page))
    assert out.returncode == 0, out.stderr
    assert page.read_text().count("data:image/png;base64,") == 3


@pytest.mark.browser
def test_report_of_a_real_replay_renders_in_chromium(replayed: str, tmp_path: Path) -> None:
    page = tmp_path / "r.html"
    assert gpufrag(replayed, "report", "--out", str(page)).returncode == 0
    dom = chromium(tmp_path, "--dump-dom", page.as_uri()).stdout
    assert 'data-images-loaded="3/3"' in dom
    shot = tmp_path / "shot.png"
    chromium(tmp_path, f"--screenshot={shot}", "--window-size=1280,2400", page.as_uri())
    pixels = imread(shot)
    assert pixels.std() > 0.01  # not a blank page


def test_second_replay_adds_no_rows(replayed: str) -> None:
    with store_at(replayed) as st:
        before = {t: count(st, t) for t in TABLES}
    out = gpufrag(replayed, "replay", "--node-limit", str(NODE_LIMIT))
    assert out.returncode == 0, out.stderr
    with store_at(replayed) as st:
        after = {t: count(st, t) for t in TABLES}
    assert after == before


def test_sigint_leaves_a_consistent_store(tmp_path: Path) -> None:
    dsn = dsn_for(tmp_path / "st")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streams.app",
            "replay",
            "--node-limit",
            str(NODE_LIMIT),
            "--speed",
            "20",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=gpufrag_env(dsn),
    )
    assert proc.stderr is not None
    started = proc.stderr.readline()  # the replay says when it starts taking events
    assert "replaying trace:openb_pod_list_default" in started, started
    time.sleep(2)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert "interrupted" in stdout
    with store_at(dsn) as st:
        status, summary_text = st.query("SELECT status, summary FROM runs FINAL").rows[0]
        summary = json.loads(str(summary_text))
        n = int(summary["events"])
        assert status == "interrupted"
        assert n > 0
        assert count(st, "events") == n
    # everything the operators emitted for those n events is stored, and nothing else
    assert stored_keys(stored_signals(dsn)) == as_keys(operator_signals(n, flush=False))


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["sql", "no_such_query"], "no named query 'no_such_query'"),
        (["sql", "signal_timeline", "--param", "limit=many"], "not a valid UInt32"),
        (["sql", "signal_timeline", "--param", "nope"], "not of the form name=value"),
        (["replay", "--pods", "/nonexistent/pods.csv"], "file not found"),
        (["explain", "trace/nobody"], "the store has no runs yet"),
    ],
)
def test_bad_input_is_one_line(tmp_path: Path, args: list[str], needle: str) -> None:
    dsn = dsn_for(tmp_path / "st")
    with store_at(dsn):
        pass  # a store that exists and holds no run (a missing one is refused before)
    out = gpufrag(dsn, *args)
    assert out.returncode != 0
    assert needle in out.stderr, out.stderr
    assert "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr


def test_corrupt_store_path_is_one_line(tmp_path: Path) -> None:
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    for args in (["sql", "signal_timeline"], ["replay", "--node-limit", "5"], ["report"]):
        out = gpufrag(dsn_for(not_a_dir), *args)
        assert out.returncode != 0
        assert "Traceback" not in out.stderr
        assert len(out.stderr.strip().splitlines()) == 1, out.stderr
        assert str(not_a_dir) in out.stderr


def test_replay_json_summary_is_one_object_that_agrees_with_the_store(tmp_path: Path) -> None:
    dsn = dsn_for(tmp_path / "st")
    out = gpufrag(dsn, "replay", "--node-limit", str(NODE_LIMIT), "--json")
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)  # the whole of stdout is the one object
    for key in ("run_id", "events", "alloc_pct", "frag_amount_pct", "frag_ratio_pct"):
        assert key in summary
    assert summary["status"] == "finished" and summary["elapsed_s"] >= 0
    signals = stored_signals(dsn)
    by_kind: dict[str, dict[str, int]] = {}
    for row in signals:  # one row per opening and one per resolution
        per = by_kind.setdefault(str(row["kind"]), {"open": 0, "resolved": 0})
        per[str(row["state"])] += 1
    for kind in ("fragmentation", "stranded_gpus", "unplaceable_pending"):
        assert summary["signals"][kind] == by_kind.get(kind, {"open": 0, "resolved": 0}), kind
    with store_at(dsn) as st:
        assert count(st, "events") == summary["events"]
        (row,) = st.query(
            "SELECT alloc_pct, unplaceable_pods, stranded_nodes FROM cluster_frag FINAL "
            "ORDER BY ts DESC LIMIT 1"
        ).rows
    assert row[0] == pytest.approx(summary["alloc_pct"], abs=1e-3)
    assert (row[1], row[2]) == (summary["unplaceable_pods"], summary["stranded_nodes"])
