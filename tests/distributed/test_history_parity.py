"""One input, two runners, one history: the bundled trace in fgd mode with the scripted OOM
incidents, replayed by the embedded runner into one chDB store and published to Kafka for a
Faust worker and `gpufrag sink` to store in another. Every named query, `explain` for sample
pods, the report's figures, `whatif` and the run's summary must give the same answers from
both.

Planning is off on both sides (a replay's default; ``GPUFRAG_PLANNERS__ENABLED=[]`` for the
worker): `replay --actions dry-run` holds the simulation at each failed pod until the pipeline
has analysed it, which evaluates the pending queue at other instants than a free-running input
does, so it is not the same input for the detectors.

``GPUFRAG_PARITY_NODES`` sets the cluster size (default 120 of the trace's 1,213 nodes, about
a minute on a 2-core machine; 0 for the whole trace).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
import pytest

from streams.app.commands.report import Axis, load_report
from streams.app.commands.sql import queries_dir
from streams.app.queries.named_queries import bind, load_queries
from streams.app.sinks.topic_sink import sink_topics
from tests.app.metrics_scrape import Scrape, compare, instant_of, parse, rows_by_instant
from tests.app.pipeline_helpers import gpufrag, gpufrag_env, store_at
from tests.distributed.worker_helpers import (
    kafka_env,
    last_event_time,
    start_sink,
    start_worker,
    until_reported,
    wait_caught_up,
)
from tests.http_probe import get
from tests.ports import free_port

pytestmark = pytest.mark.kafka
NODES = int(os.environ.get("GPUFRAG_PARITY_NODES", "120"))
STORMS = 2
SAME_TABLES = (
    "events",
    "gpu_samples",
    "node_profiles",
    "cluster_frag",
    "pending_explanations",
    "signals",
    "actions",
)
SUMMARY_KEYS = (
    "events",
    "frag_amount_pct",
    "frag_ratio_pct",
    "alloc_pct",
    "unplaceable_pods",
    "stranded_nodes",
    "signals",
)


def _input_options() -> list[str]:
    limit = ["--node-limit", str(NODES)] if NODES else []
    return [*limit, "--inject-oom-storms", str(STORMS), "--seed", "42"]


def _embedded(dsn: str) -> dict[str, Any]:
    out = gpufrag(dsn, "replay", *_input_options(), "--json", timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    summary: dict[str, Any] = orjson.loads(out.stdout)
    assert summary["storms_found"] == STORMS, summary
    return summary


def _distributed(
    bootstrap: str, prefix: str, dsn: str, work: Path, last: datetime
) -> tuple[str, Scrape]:
    """Worker, sink and publisher until the sink has stored everything the worker made for the
    input's last instant; the sink's log, and the worker's metrics scraped then."""
    port = free_port()
    worker = start_worker(bootstrap, prefix, work / "worker.log", metrics_port=port)
    sink = start_sink(bootstrap, prefix, dsn, work / "sink.log")
    try:
        out = subprocess.run(
            [sys.executable, "-m", "streams.app", "publish", "--prefix", prefix, *_input_options()],
            capture_output=True,
            text=True,
            timeout=900,
            env=kafka_env(bootstrap),
            check=False,
        )
        assert out.returncode == 0, out.stderr[-3000:]
        until_reported(bootstrap, prefix, last, timeout_s=900)
        wait_caught_up(bootstrap, f"{prefix}gpufrag-sink", sink_topics(prefix))
        status, body = get(port, "/metrics")
        assert status == 200
    finally:
        for proc in (sink, worker):
            proc.terminate()
        for proc in (sink, worker):
            proc.wait(120)
    log = (work / "sink.log").read_text()
    assert sink.returncode == 0, log[-3000:]
    return log, parse(body)


def _rows(dsn: str, sql: str, run_id: str) -> list[tuple[object, ...]]:
    with store_at(dsn) as st:
        return [tuple(r) for r in st.query(sql, parameters={"run_id": run_id}).rows]


def _named(dsn: str, run_id: str) -> dict[str, list[tuple[object, ...]]]:
    out = {}
    with store_at(dsn) as st:
        for name, query in sorted(load_queries(queries_dir()).items()):
            params = bind(query, {"run_id": run_id}, latest_run=lambda: None)
            out[name] = [tuple(r) for r in st.query(query.sql, parameters=params).rows]
    return out


def _explain(dsn: str, run_id: str, pod: str) -> str:
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


def _whatif(dsn: str, run_id: str) -> dict[str, Any]:
    out = gpufrag(dsn, "whatif", "--run", run_id, "--policy", "fgd", "--json")
    assert out.returncode == 0, out.stderr
    result: dict[str, Any] = orjson.loads(out.stdout)
    assert result.pop("run_id") == run_id
    return result


def _report(dsn: str, run_id: str) -> tuple[object, ...]:
    with store_at(dsn) as st:
        data = load_report(st, run_id, axis=Axis.ARRIVAL)
    return (
        data.frag_series,
        data.pending_by_reason,
        data.stranded_nodes,
        data.signal_counts,
        data.recent_signals,
    )


def test_the_embedded_runner_and_kafka_workers_and_sink_keep_the_same_history(
    kafka_bootstrap: str, topic_prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUFRAG_PLANNERS__ENABLED", "[]")
    ours, theirs = f"chdb://{tmp_path / 'embedded'}", f"chdb://{tmp_path / 'distributed'}"
    embedded = _embedded(ours)
    sink_log, scrape = _distributed(
        kafka_bootstrap, topic_prefix, theirs, tmp_path, last_event_time(ours)
    )
    a = str(embedded["run_id"])
    (b, mode, raw_summary) = _rows(theirs, "SELECT run_id, mode, summary FROM runs FINAL", "")[0]
    assert mode == "distributed"
    b = str(b)

    # the worker's gauges are its last instant's report, the row the sink stored for it
    at = instant_of(scrape)
    assert at is not None, sorted(n for n, _ in scrape)
    with store_at(theirs) as st:
        compare(scrape, rows_by_instant(st, b)[at])

    # every named query gives the same rows
    named = _named(ours, a)
    assert named == _named(theirs, b), sink_log[-2000:]
    assert named["signal_timeline"] and named["fragmentation_over_time"]
    storms = [r for r in named["signal_timeline"] if r[2] == "oom_storm" and r[1] == "open"]
    assert len(storms) >= STORMS  # the scripted incidents are in both histories

    # the tables themselves: the same rows by key
    for table in SAME_TABLES:
        sql = f"SELECT count() FROM {table} FINAL WHERE run_id = {{run_id:String}}"
        assert _rows(ours, sql, a) == _rows(theirs, sql, b), table
    keys = "SELECT node, ts, seq, profile FROM node_profiles FINAL WHERE run_id = {run_id:String}"
    assert set(_rows(ours, keys, a)) == set(_rows(theirs, keys, b))
    # task profiles and the pods' GPU memory peaks: the same rows by key, the storm pods'
    # (alive under two minutes) included
    tasks = "SELECT pod, ts, seq, profile FROM task_profiles FINAL WHERE run_id = {run_id:String}"
    assert set(_rows(ours, tasks, a)) == set(_rows(theirs, tasks, b))
    peaks = (
        "SELECT pod, ts, seq, node, used_mib FROM task_memory_peaks FINAL "
        "WHERE run_id = {run_id:String}"
    )
    our_peaks = set(_rows(ours, peaks, a))
    assert our_peaks == set(_rows(theirs, peaks, b))
    assert len({r[0] for r in our_peaks}) >= 4 * STORMS  # each storm: its aggressor, victims

    # explain for a sample of the pods that were pending at an evaluation
    pods = _rows(
        ours,
        "SELECT DISTINCT pod FROM pending_explanations FINAL WHERE run_id = {run_id:String} "
        "ORDER BY cityHash64(pod) LIMIT 6",
        a,
    )
    assert pods
    for (pod,) in pods:
        assert _explain(ours, a, str(pod)) == _explain(theirs, b, str(pod)), pod

    # the report's figures, the curve against arrived demand on both sides
    ours_report = _report(ours, a)
    assert ours_report == _report(theirs, b)
    assert ours_report[0]  # a curve to compare

    # what-if on the sink's history is the what-if on the embedded runner's
    assert _whatif(ours, a) == _whatif(theirs, b)

    # the run's summary: what the history alone can tell
    summary = orjson.loads(str(raw_summary))
    assert {k: summary[k] for k in SUMMARY_KEYS} == {
        k: (
            {
                kind: {s: n for s, n in c.items() if n}
                for kind, c in embedded[k].items()
                if any(c.values())
            }
            if k == "signals"
            else embedded[k]
        )
        for k in SUMMARY_KEYS
    }
