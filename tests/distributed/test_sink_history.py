"""`gpufrag sink` keeps the distributed runner's history as the embedded runner keeps its own:
input events, profile snapshots, the cluster's fragmentation per instant and the pending
explanations; reading every record again adds no row."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import orjson
import pytest

from models import Envelope
from streams.app.sinks.topic_sink import sink_topics
from streams.distributed import topics
from tests.app.pipeline_helpers import store_at
from tests.distributed.quota_events import events
from tests.distributed.runner_signals import through_worker
from tests.distributed.worker_helpers import start_sink, wait_caught_up
from tests.kube_fake.objects import T0
from tests.streams.quota_scenarios import gpu_node

pytestmark = pytest.mark.kafka
TABLES = (
    "events",
    "node_profiles",
    "task_profiles",
    "cluster_frag",
    "pending_explanations",
)


def scenario() -> list[Envelope]:
    """The quota scenario, and a node that comes later: the pending pods are explained when
    event time passes the detector's next evaluation."""
    late = gpu_node("late-node")
    return [
        *events(),
        Envelope.wrap(late.payload, event_time=T0 + timedelta(seconds=300), source=late.source),
    ]


def explained(raw: list[bytes]) -> bool:
    return any(orjson.loads(r).get("explanations") for r in raw)


def run_sink(bootstrap: str, prefix: str, dsn: str, group: str, log: Path) -> str:
    """A sink in ``group`` until it has stored every record on the bus; its output."""
    sink = start_sink(bootstrap, prefix, dsn, log, group=group)
    try:
        wait_caught_up(bootstrap, f"{prefix}{group}", sink_topics(prefix))
    finally:
        sink.terminate()
        sink.wait(120)
    said = log.read_text()
    assert sink.returncode == 0, said[-3000:]
    return said


def counts(dsn: str, *, final: bool) -> dict[str, int]:
    with store_at(dsn) as st:
        return {
            t: int(str(st.query(f"SELECT count() FROM {t}{' FINAL' if final else ''}").rows[0][0]))
            for t in TABLES
        }


def test_the_sink_stores_the_workers_history_once(
    kafka_bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    envs = scenario()
    reports, log = through_worker(
        kafka_bootstrap,
        topic_prefix,
        envs,
        topic=topics.CLUSTER_REPORTS.full_name(topic_prefix),
        done=explained,
        work=tmp_path,
    )
    assert explained(reports), log
    dsn = f"chdb://{tmp_path / 'store'}"
    said = run_sink(kafka_bootstrap, topic_prefix, dsn, "history-1", tmp_path / "sink-1.log")
    first = counts(dsn, final=True)
    assert first["events"] == len(envs), said
    # one row per instant; the worker may have reported more after the reports were read
    assert first["cluster_frag"] >= len({orjson.loads(r)["at"] for r in reports}), said
    assert all(first[t] > 0 for t in TABLES), (first, said)
    assert counts(dsn, final=False) == first  # one copy of each row
    with store_at(dsn) as st:
        (run,) = st.query("SELECT source, mode FROM runs FINAL").rows
    assert str(run[0]).startswith("distributed:kafka:") and run[1] == "distributed"

    # a second sink in another group reads every record from the start again
    run_sink(kafka_bootstrap, topic_prefix, dsn, "history-2", tmp_path / "sink-2.log")
    assert counts(dsn, final=True) == first
