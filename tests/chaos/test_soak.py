"""The chaos soak: the bundled trace published at a steady rate to three Faust workers, the
sink, the alerter and the actuator in enforce mode, while faults from a seeded schedule hit them
(``soak.py``); then the sink's history against the embedded runner's for the same input, row
for row by key: signals, node and task profiles, memory peaks, pending explanations,
fragmentation per instant, the named queries and the report; every malformed record in the
dead letters under the sink's run id; what Alertmanager lists at the end, after its own
outage: one alert for each signal still open; and the evictions: every one the embedded runner
asked for carried out once, by one of two actuators that passed the Lease between them, on the
pods of a kube-apiserver of the soak's own (the input's pods are created there first,
``soak_input.py``), and no other pod touched.

Short form (``GPUFRAG_SOAK=1 pytest tests/chaos``; in `.ci/run`): 120 of the trace's nodes with
two OOM storms (2,872 events, 5 evictions) over 150 s, one round of faults. Long form:
``deploy/local/soak.sh MINUTES`` sets ``GPUFRAG_SOAK_MINUTES``: the whole trace over that many
minutes, a round every four minutes. ``GPUFRAG_SOAK_SEED`` picks the schedule (default 7).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from connectors.trace.bundled import bundled_pods_path
from streams.app.sinks.topic_sink import sink_topics
from streams.distributed import topics
from tests.chaos.soak import Soak, publisher, schedule
from tests.chaos.soak_input import (
    PodKey,
    create_pods,
    pods_gone,
    pods_of,
    trace_events,
    with_uids,
    write_events,
)
from tests.distributed.actions_topic import every_record, until_committed
from tests.distributed.history_compare import assert_same_history, rows
from tests.distributed.worker_helpers import (
    broker_of_own,
    last_event_time,
    until_reported,
    wait_caught_up,
)
from tests.local_apiserver import apiserver_at

pytestmark = [pytest.mark.chaos, pytest.mark.kafka, pytest.mark.alertmanager]

MINUTES = float(os.environ.get("GPUFRAG_SOAK_MINUTES", "0"))
SEED = int(os.environ.get("GPUFRAG_SOAK_SEED", "7"))
SHORT_SPAN_S = 150.0
ROUND_S = 240.0


EMBEDDED = "embedded"
"""The embedded run's id in its store."""
ENFORCE = {"GPUFRAG_GUARDRAILS__MODE": "enforce"}
"""Both runners plan in enforce mode: the workers send their requests to the actuator, the
embedded runner (with no actuator) records them as proposed."""


OPEN_SIGNALS = """
SELECT fingerprint FROM (
    SELECT fingerprint, opened_at, max(state = 'resolved') AS ended
    FROM signals FINAL WHERE run_id = {run_id:String}
    GROUP BY fingerprint, opened_at
)
GROUP BY fingerprint HAVING argMax(ended, opened_at) = 0
"""
"""The signals open at the end of the input: their fingerprints' last openings never ended."""


def _until_listed(soak: Soak, expected: set[str], *, timeout_s: float) -> set[str]:
    """What Alertmanager lists once it equals ``expected``, or at the deadline."""
    deadline = time.monotonic() + timeout_s
    while (listed := soak.alert_fingerprints()) != expected and time.monotonic() < deadline:
        time.sleep(1.0)
    return listed


@pytest.fixture
def soak_broker(tmp_path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    """A broker of the soak's own: it is stopped and started mid-run."""
    with broker_of_own(tmp_path / "kafka", keep_logs=tmp_path / "kafka-logs") as broker:
        yield broker


@pytest.fixture
def soak_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A kube-apiserver of the soak's own (a fresh etcd: the input's namespaces are created
    there, and no namespace can be removed without a controller); its kubeconfig."""
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with apiserver_at(tmp_path / "apiserver") as server:
        yield server.write_kubeconfig(tmp_path / "kubeconfig")


def _input(kubeconfig: Path, path: Path) -> tuple[Path, set[PodKey], int]:
    """The input in event-time order (as `gpufrag publish --file` sends it), its pods created
    in the API server with their uids in the events; the file, the pods and how many events."""
    envs = trace_events(node_limit=None if MINUTES else 120, storms=2, seed=42)
    pods = pods_of(envs)
    uids = asyncio.run(create_pods(kubeconfig, pods))
    ordered = sorted(with_uids(envs, uids), key=lambda e: e.event_time)
    return write_events(path, ordered), pods, len(ordered)


def _embedded(events: Path, dsn: str, work: Path) -> None:
    done = subprocess.run(
        [
            *(sys.executable, "-m", "tests.app.embedded_run", str(events), dsn),
            *(str(work / "embedded-signals.jsonl"), EMBEDDED, str(bundled_pods_path())),
        ],
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]


def test_the_history_after_a_round_of_faults_equals_the_embedded_runners(
    soak_broker: tuple[str, dict[str, str]],
    soak_cluster: Path,
    topic_prefix: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in ENFORCE.items():
        monkeypatch.setenv(name, value)
    bootstrap, broker_env = soak_broker
    ours, theirs = f"chdb://{tmp_path / 'embedded'}", f"chdb://{tmp_path / 'distributed'}"
    events, pods, n_events = _input(soak_cluster, tmp_path / "events.jsonl")
    _embedded(events, ours, tmp_path)
    span_s = MINUTES * 60 if MINUTES else SHORT_SPAN_S
    rounds = max(1, int(span_s // ROUND_S)) if MINUTES else 1
    faults = schedule(SEED, span_s=span_s, rounds=rounds)

    soak = Soak(
        bootstrap,
        broker_env,
        topic_prefix,
        theirs,
        tmp_path,
        kubeconfig=soak_cluster,
        run_for_s=span_s + 1800,
    )
    soak.start()
    pub_log = tmp_path / "publish.log"
    pub = publisher(
        bootstrap, topic_prefix, ["--file", str(events)], n_events / span_s, log=pub_log
    )
    try:
        soak.run_faults(faults, pub)
        pub.wait(timeout=span_s + 900)
        assert pub.returncode == 0, pub_log.read_text(errors="replace")[-3000:]
        until_reported(bootstrap, topic_prefix, last_event_time(ours), timeout_s=900)
        wait_caught_up(bootstrap, f"{topic_prefix}gpufrag-sink", sink_topics(topic_prefix))
        asyncio.run(until_committed(bootstrap, topic_prefix))
        # the actuator's outcomes are on the actions topic, which the sink stores too
        wait_caught_up(bootstrap, f"{topic_prefix}gpufrag-sink", sink_topics(topic_prefix))
        # every alert opened was resolved, or is still listed for a signal still open: the
        # alerter sent through Alertmanager's outage (retried, then re-sent its open alerts)
        still_open = {str(r[0]) for r in rows(ours, OPEN_SIGNALS, EMBEDDED)}
        assert still_open, "the input has signals open at its end"
        listed = _until_listed(soak, still_open, timeout_s=300)
        assert listed == still_open, (sorted(listed ^ still_open), "\n".join(soak.done))
        on_actions = asyncio.run(every_record(bootstrap, topics.ACTIONS.full_name(topic_prefix)))
        # kept with the run's files: proposals, requests and outcomes in the order sent
        (tmp_path / "actions.jsonl").write_bytes(b"\n".join(on_actions) + b"\n")
        outcomes = [
            r
            for r in map(orjson.loads, on_actions)
            if isinstance(r, dict) and "actuator" in (r.get("evidence") or {})
        ]
    finally:
        if pub.poll() is None:
            pub.kill()
        sink_status = soak.stop()
    report = "\n".join(soak.done)
    print(f"\nfaults (seed {SEED}):\n{report}")  # shown with -s (soak.sh)
    assert sink_status == 0, report
    assert soak.alerter is not None and soak.alerter.returncode == 0, report
    for identity, proc in soak.actuators.items():
        assert proc.returncode == 0, soak.actuator_log(identity)[-3000:]
    assert len(soak.done) == len(faults)
    # which faults met a running stream is in `report` (each is placed in the first half of
    # its round's share; a slow host may push the last ones past the end of the stream: the
    # recovery is checked all the same, so it is reported, not asserted)

    named = assert_same_history(ours, EMBEDDED, theirs, "live", carried_out=True)
    assert named["signal_timeline"], report
    _assert_evicted_once(ours, theirs, outcomes, asyncio.run(pods_gone(soak_cluster, pods)))
    # the malformed records, each a dead letter under the sink's run, with its origin; and no
    # input refused as late: the publisher kept its promises, so a late one is a lost event
    letters = rows(
        theirs,
        "SELECT reason FROM dead_letter FINAL WHERE run_id = {run_id:String}",
        "live",
    )
    reasons = [str(r[0]) for r in letters]
    malformed = [r for r in reasons if ".gpufrag.pods/" in r and "late:" not in r]
    assert len(malformed) >= soak.malformed_sent > 0, (reasons[:5], report)
    assert not [r for r in reasons if "late:" in r], (reasons[:5], report)


def _assert_evicted_once(
    ours: str, theirs: str, outcomes: list[dict[str, object]], gone: set[PodKey]
) -> None:
    """The embedded runner's eviction requests, each carried out once (one actuator's outcome
    on the topic, stored as executed), and the pods the API server lost exactly their
    targets."""
    asked = rows(
        ours,
        "SELECT id, target FROM actions FINAL WHERE run_id = {run_id:String} "
        "AND mode = 'enforce' AND outcome = 'proposed' ORDER BY id",
        EMBEDDED,
    )
    done = rows(
        theirs,
        "SELECT id, target FROM actions FINAL WHERE run_id = {run_id:String} "
        "AND outcome = 'executed' ORDER BY id",
        "live",
    )
    assert asked, "the input plans evictions"
    assert done == asked
    per_id = Counter(str(o["id"]) for o in outcomes)
    assert per_id == Counter(str(i) for i, _ in asked), per_id
    assert gone == {tuple(str(t).split("/", 1)) for _, t in done}
