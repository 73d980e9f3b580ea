"""`gpufrag replay` end to end on a reduced real trace, checked against the operators."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest
from matplotlib.image import imread

from connectors.trace.alibaba_csv import read_nodes, read_pods
from connectors.trace.bundled import bundled_nodes_path, bundled_pods_path
from connectors.trace.simulated_cluster import ReplayOptions, SimulatedCluster, TraceMode
from models import Signal
from streams.app.workload import pod_shape
from streams.fragmentation.analysis import FragmentationAnalysis
from streams.fragmentation.instants import InstantAnalysis
from streams.fragmentation.shapes import TypicalPods
from streams.profiles.join import ProfileJoin
from streams.runner.embedded import keyed_updates
from tests.app.pipeline_helpers import count, dsn_for, gpufrag, gpufrag_env, store_at
from tests.app.test_report_browser import chromium

NODE_LIMIT = 40
TABLES = (
    "events",
    "node_profiles",
    "task_profiles",
    "signals",
    "pending_explanations",
    "cluster_frag",
    "runs",
)


def operator_signals(
    limit_events: int | None = None, *, flush: bool = True, node_limit: int = NODE_LIMIT
) -> list[Signal]:
    """What the core operators emit for the reduced replay, hosted by nothing but a loop."""
    return operator_run(limit_events, flush=flush, node_limit=node_limit)[0]


def operator_run(
    limit_events: int | None = None, *, flush: bool = True, node_limit: int = NODE_LIMIT
) -> tuple[list[Signal], ProfileJoin]:
    """The signals and the final profiles of the reduced replay, from a plain loop over the
    operators: the join, then the analysis one event-time instant at a time."""
    nodes = read_nodes(bundled_nodes_path())
    pods = read_pods(bundled_pods_path())
    sim = SimulatedCluster(
        nodes,
        pods,
        options=ReplayOptions(
            mode=TraceMode.FGD, node_limit=node_limit, source="trace:openb_pod_list_default"
        ),
    )
    join = ProfileJoin()
    analysis = FragmentationAnalysis(typical=TypicalPods.from_shapes(map(pod_shape, pods)))
    instants = InstantAnalysis(analysis)
    out: list[Signal] = []
    last = None
    for n, env in enumerate(sim.events()):
        if limit_events is not None and n >= limit_events:
            break
        env = env.model_copy(update={"seq": n})
        if last is not None and env.event_time > last:
            out += instants.release(last)
        for key, u in keyed_updates(env, join.apply(env)):
            out += instants.add(key, u)
        last = env.event_time
    if last is not None:
        out += instants.release(last)
    if flush:
        out += analysis.flush()
    return out, join


def stored_signals(dsn: str) -> list[dict[str, object]]:
    with store_at(dsn) as st:
        res = st.query(
            "SELECT fingerprint, kind, scope_id, state, opened_at, resolved_at, evidence "
            "FROM signals FINAL ORDER BY fingerprint, opened_at, state"
        )
    return [dict(zip(res.columns, r, strict=True)) for r in res.rows]


def as_keys(signals: list[Signal]) -> list[tuple[object, ...]]:
    return sorted(
        (
            s.fingerprint,
            s.kind.value,
            s.scope_id,
            s.state,
            s.opened_at,
            s.resolved_at,
            orjson.dumps(s.evidence, option=orjson.OPT_SORT_KEYS),
        )
        for s in signals
    )


def stored_keys(rows: list[dict[str, object]]) -> list[tuple[object, ...]]:
    return sorted(
        (
            r["fingerprint"],
            r["kind"],
            r["scope_id"],
            r["state"],
            r["opened_at"],
            r["resolved_at"],
            orjson.dumps(orjson.loads(str(r["evidence"])), option=orjson.OPT_SORT_KEYS),
        )
        for r in rows
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
    out = gpufrag(dsn_for(tmp_path / "st"), *args)
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
