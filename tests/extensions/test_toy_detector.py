"""A detector from a plugin: registered by one line in its own module (``toy_detector``),
named in ``GPUFRAG_PLUGINS``, no product module edited. The embedded runner stores its
signals, and a Faust worker fed the same events over the real broker gives the same ones."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import orjson
import pytest

from models import Envelope, Node, NodeEvent, Signal, from_json, to_json
from tests.app.pipeline_helpers import dsn_for, store_at
from tests.distributed.runner_signals import worker_signals
from tests.distributed.worker_helpers import signal_key
from tests.streams.planner_scenarios import CPU, MEM, T0, PodSpec, pod_event

PLUGIN = "tests.extensions.toy_detector"
KIND = "toy_full_node"  # the toy's kind, spelt here too: this process never imports the toy


def events() -> list[Envelope]:
    """Two 2-card nodes: node-a fills and frees a card, node-b fills with one 2-card pod."""
    out = []
    for name in ("node-a", "node-b"):
        node = Node(name=name, cpu_milli=CPU, memory_mib=MEM, gpu_model="A100", gpu_count=2)
        out.append(Envelope.wrap(NodeEvent(change="upsert", node=node), event_time=T0, source="t"))
    specs = [
        PodSpec("a0", 1000, node="node-a", cards=(0,)),
        PodSpec("a1", 1000, node="node-a", cards=(1,)),
        PodSpec("b0", 1000, gpu_count=2, node="node-b", cards=(0, 1)),
    ]
    for n, spec in enumerate(specs):
        out.append(pod_event(spec, T0 + timedelta(seconds=10 * (n + 1))))
    gone = pod_event(specs[1], T0 + timedelta(seconds=60))
    out.append(
        gone.model_copy(update={"payload": gone.payload.model_copy(update={"change": "delete"})})
    )
    return out


def embedded(tmp_path: Path, *, plugins: list[str]) -> tuple[list[Signal], str]:
    """The events through the embedded runner in a process of their own, stored in a chDB
    store; the signals it emitted, and the store's DSN."""
    file, out, dsn = tmp_path / "events.jsonl", tmp_path / "signals.jsonl", dsn_for(tmp_path / "st")
    file.write_bytes(b"".join(to_json(e) + b"\n" for e in events()))
    env = {**os.environ, "GPUFRAG_PLUGINS": orjson.dumps(plugins).decode()}
    done = subprocess.run(
        [sys.executable, "-m", "tests.extensions.embedded_run", str(file), dsn, str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return [from_json(Signal, line) for line in out.read_bytes().splitlines()], dsn


def stored_toy_states(dsn: str) -> list[tuple[str, str]]:
    with store_at(dsn) as st:
        rows = st.query(
            "SELECT scope_id, state FROM signals FINAL WHERE kind = {k:String} "
            "ORDER BY scope_id, state",
            {"k": KIND},
        ).rows
    return [(str(r[0]), str(r[1])) for r in rows]


def test_a_plugin_detector_runs_in_the_embedded_runner_and_its_signals_are_stored(
    tmp_path: Path,
) -> None:
    signals, dsn = embedded(tmp_path, plugins=[PLUGIN])
    toy = sorted((s.scope_id, s.state) for s in signals if s.kind == KIND)
    assert toy == [("node-a", "open"), ("node-a", "resolved"), ("node-b", "open")]
    assert stored_toy_states(dsn) == toy


def test_without_the_plugin_the_toy_detector_does_not_exist(tmp_path: Path) -> None:
    signals, dsn = embedded(tmp_path, plugins=[])
    assert [s for s in signals if s.kind == KIND] == []
    assert stored_toy_states(dsn) == []


@pytest.mark.kafka
def test_a_plugin_detector_gives_the_same_signals_through_a_faust_worker(
    kafka_bootstrap: str, topic_prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    signals, _ = embedded(tmp_path, plugins=[PLUGIN])
    ours = {signal_key(s.model_dump(mode="json")) for s in signals if s.kind == KIND}
    assert len(ours) == 3
    monkeypatch.setenv("GPUFRAG_PLUGINS", orjson.dumps([PLUGIN]).decode())
    theirs, log = worker_signals(
        kafka_bootstrap, topic_prefix, events(), {KIND}, expect=len(ours), work=tmp_path
    )
    assert theirs == ours, log
