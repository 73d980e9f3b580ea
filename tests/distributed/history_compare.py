"""One history against another, row for row by key: what the embedded runner stored for an
input against what the Kafka workers and `gpufrag sink` stored for the same input (the parity
test, the chaos soak). Each store is a chDB path; each side names its run."""

from __future__ import annotations

import re
import subprocess
import sys
from typing import Any

import orjson

from streams.app.commands.report import Axis, load_report
from streams.app.commands.sql import queries_dir
from streams.app.queries.named_queries import bind, load_queries
from tests.app.pipeline_helpers import gpufrag, gpufrag_env, store_at

SAME_TABLES = (
    "events",
    "gpu_samples",
    "node_profiles",
    "task_profiles",
    "task_memory_peaks",
    "cluster_frag",
    "pending_explanations",
    "signals",
    "actions",
)
"""Tables whose rows (after the keys merge) both runners must hold alike."""


def rows(dsn: str, sql: str, run_id: str) -> list[tuple[object, ...]]:
    with store_at(dsn) as st:
        return [tuple(r) for r in st.query(sql, parameters={"run_id": run_id}).rows]


def named_queries(dsn: str, run_id: str) -> dict[str, list[tuple[object, ...]]]:
    out = {}
    with store_at(dsn) as st:
        for name, query in sorted(load_queries(queries_dir()).items()):
            params = bind(query, {"run_id": run_id}, latest_run=lambda: None)
            out[name] = [tuple(r) for r in st.query(query.sql, parameters=params).rows]
    return out


def explain_text(dsn: str, run_id: str, pod: str) -> str:
    # one width for both: the run ids differ in length, so wrapping must not depend on them
    out = subprocess.run(
        [sys.executable, "-m", "streams.app", "explain", pod, "--run", run_id],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**gpufrag_env(dsn), "COLUMNS": "400"},
    )
    assert out.returncode == 0, out.stderr
    return re.sub(r"\(run [0-9a-z-]+\)", "(run R)", out.stdout)


def whatif_json(dsn: str, run_id: str) -> dict[str, Any]:
    out = gpufrag(dsn, "whatif", "--run", run_id, "--policy", "fgd", "--json")
    assert out.returncode == 0, out.stderr
    result: dict[str, Any] = orjson.loads(out.stdout)
    assert result.pop("run_id") == run_id
    return result


def report_figures(dsn: str, run_id: str) -> tuple[object, ...]:
    with store_at(dsn) as st:
        data = load_report(st, run_id, axis=Axis.ARRIVAL)
    return (
        data.frag_series,
        data.pending_by_reason,
        data.stranded_nodes,
        data.signal_counts,
        data.recent_signals,
    )


def assert_same_history(
    ours: str, a: str, theirs: str, b: str, *, carried_out: bool = False
) -> dict[str, Any]:
    """Run ``a`` in store ``ours`` and run ``b`` in ``theirs`` hold the same history: every
    named query's rows, every table's row count by key, node and task profiles and memory
    peaks by key, `explain` for a sample of pending pods, the report's figures. Returns the
    named queries' rows (for checks of what they hold). ``carried_out``: run ``b``'s enforce
    requests were carried out by an actuator and run ``a``'s were not (the embedded runner has
    none): `explain` names a plan executed at the actuator's time where ``a`` names it
    proposed at its instant, and is compared with that taken out (which requests were carried
    out is the caller's to check)."""
    named = named_queries(ours, a)
    assert named == named_queries(theirs, b)
    for table in SAME_TABLES:
        sql = f"SELECT count() FROM {table} FINAL WHERE run_id = {{run_id:String}}"
        assert rows(ours, sql, a) == rows(theirs, sql, b), table
    for sql in (
        "SELECT node, ts, seq, profile FROM node_profiles FINAL WHERE run_id = {run_id:String}",
        "SELECT pod, ts, seq, profile FROM task_profiles FINAL WHERE run_id = {run_id:String}",
        "SELECT pod, ts, seq, node, used_mib FROM task_memory_peaks FINAL "
        "WHERE run_id = {run_id:String}",
        "SELECT ts, frag_amount_pct, frag_ratio_pct, alloc_pct, arrived_pct FROM cluster_frag "
        "FINAL WHERE run_id = {run_id:String}",
        "SELECT fingerprint, opened_at, state, ts FROM signals FINAL "
        "WHERE run_id = {run_id:String}",
    ):
        mine, theirs_rows = set(rows(ours, sql, a)), set(rows(theirs, sql, b))
        assert mine == theirs_rows, (sql, sorted(mine ^ theirs_rows, key=str)[:6])
    pods = rows(
        ours,
        "SELECT DISTINCT pod FROM pending_explanations FINAL WHERE run_id = {run_id:String} "
        "ORDER BY cityHash64(pod) LIMIT 6",
        a,
    )
    assert pods
    for (pod,) in pods:
        mine, other = explain_text(ours, a, str(pod)), explain_text(theirs, b, str(pod))
        if carried_out:
            mine, other = _as_asked(mine), _as_asked(other)
        assert mine == other, pod
    figures = report_figures(ours, a)
    assert figures == report_figures(theirs, b)
    assert figures[0]  # a curve to compare
    return named


def _as_asked(explained: str) -> str:
    """`explain`'s plan lines with an enforce request's outcome and time taken out."""
    text = re.sub(r"fix: (\d+) (executed|proposed) plan", r"fix: \1 asked plan", explained)
    text = re.sub(r"(?m)^(\s+[a-z_]+) at [0-9-]+ [0-9:.]+\+00:00: ", r"\1 at T: ", text)
    return re.sub(r"\b(executed|proposed) \(enforce\)", "asked (enforce)", text)
