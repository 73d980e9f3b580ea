"""Running a plugin's components in a process of their own: a few events through the embedded
runner into a chDB store (``embedded_run``), with the plugins named in ``GPUFRAG_PLUGINS``, so
nothing is registered in the test's own process."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import orjson

from models import Envelope, Node, NodeEvent, Signal, from_json, to_json
from tests.app.pipeline_helpers import dsn_for, store_at
from tests.streams.planner_scenarios import CPU, MEM, T0, PodSpec, pod_event

KIND = "toy_full_node"  # the toy detector's kind, spelt here too: tests never import the toy


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
        [sys.executable, "-m", "tests.app.embedded_run", str(file), dsn, str(out)],
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
