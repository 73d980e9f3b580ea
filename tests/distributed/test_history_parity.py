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
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
import pytest

from streams.app.sinks.topic_sink import sink_topics
from tests.app.metrics_scrape import Scrape, compare, instant_of, parse, rows_by_instant
from tests.app.pipeline_helpers import gpufrag, store_at
from tests.distributed.history_compare import assert_same_history, rows, whatif_json
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
    (b, mode, raw_summary) = rows(theirs, "SELECT run_id, mode, summary FROM runs FINAL", "")[0]
    assert mode == "distributed"
    b = str(b)

    # the worker's gauges are its last instant's report, the row the sink stored for it
    at = instant_of(scrape)
    assert at is not None, sorted(n for n, _ in scrape)
    with store_at(theirs) as st:
        compare(scrape, rows_by_instant(st, b)[at])

    # every named query, table, profile, peak, explanation and report figure
    named = assert_same_history(ours, a, theirs, b)
    assert named["signal_timeline"] and named["fragmentation_over_time"], sink_log[-2000:]
    storms = [r for r in named["signal_timeline"] if r[2] == "oom_storm" and r[1] == "open"]
    assert len(storms) >= STORMS  # the scripted incidents are in both histories
    peaks = "SELECT DISTINCT pod FROM task_memory_peaks FINAL WHERE run_id = {run_id:String}"
    assert len(rows(ours, peaks, a)) >= 4 * STORMS  # each storm: its aggressor, victims

    # what-if on the sink's history is the what-if on the embedded runner's
    assert whatif_json(ours, a) == whatif_json(theirs, b)

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
