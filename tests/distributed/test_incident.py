"""The scripted OOM incident through the real broker and a Faust worker gives the signals the
embedded runner gives: the storm on the time-sliced card (aggressor and victims), the node
storm of the kernel's OOM kills (which the worker's node stage reads from the scheduler events'
topic), a card taken out by an XID, their resolutions and times, evidence included."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from models import (
    Envelope,
    GpufragSettings,
    GpuSample,
    GpuSampleEvent,
    NodeEvent,
    Signal,
    from_json,
    to_json,
)
from streams.distributed import topics
from streams.pipeline import define_pipeline
from tests.distributed.worker_helpers import collect, kafka_env, signal_key, start_worker
from tests.streams.kernel_ooms import kernel_incident
from tests.streams.oom_incident import incident, node
from tests.streams.pipeline_feed import feed

pytestmark = pytest.mark.kafka
KINDS = {"oom_storm", "gpu_unhealthy"}


def events() -> list[Envelope]:
    """The card incident, the kernel's kills on another node, an XID 79 on a third, and a last
    event at 1,000 s that moves event time past every quiet period."""
    out = incident()
    t0 = out[0].event_time
    kernel = kernel_incident(5)
    shift = t0 + timedelta(seconds=200) - kernel[0].event_time  # 200 s after the card's start
    out += [
        Envelope.wrap(e.payload, event_time=e.event_time + shift, source=e.source) for e in kernel
    ]
    xid = Envelope.wrap(
        GpuSampleEvent(sample=GpuSample(node="ex-1", gpu_index=0, xid=79)),
        event_time=t0 + timedelta(seconds=150),
        source="dcgm",
    )
    tick = Envelope.wrap(
        NodeEvent(change="upsert", node=node("idle-9")),
        event_time=t0 + timedelta(seconds=1_000),
        source="kube",
    )
    return sorted([*out, xid, tick], key=lambda e: e.event_time)


def embedded(envs: list[Envelope]) -> set[tuple[object, ...]]:
    p = define_pipeline(GpufragSettings()).build()
    out: list[Signal] = []
    for env in envs:
        out += feed(p, env)
    return {signal_key(s.model_dump(mode="json")) for s in out if s.kind.value in KINDS}


def test_the_incident_through_kafka_and_faust_gives_the_embedded_signals(
    kafka_bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    envs = events()
    ours = embedded(envs)
    # the card storm, the node storm and the XID, each opened and resolved
    assert sorted((k[1], k[2]) for k in ours) == [
        ("gpu_unhealthy", "open"),
        ("oom_storm", "open"),
        ("oom_storm", "open"),
        ("oom_storm", "resolved"),
        ("oom_storm", "resolved"),
    ]
    file = tmp_path / "incident.jsonl"
    file.write_bytes(b"".join(to_json(e) + b"\n" for e in envs))
    proc = start_worker(kafka_bootstrap, topic_prefix, tmp_path / "worker.log")
    try:
        out = subprocess.run(
            [
                *(sys.executable, "-m", "streams.app", "publish"),
                *("--file", str(file), "--prefix", topic_prefix),
            ],
            capture_output=True,
            text=True,
            timeout=300,
            env=kafka_env(kafka_bootstrap),
            check=False,
        )
        assert out.returncode == 0, out.stderr

        def relevant(raw: list[bytes]) -> set[tuple[object, ...]]:
            signals = [from_json(Signal, r) for r in raw]
            return {signal_key(s.model_dump(mode="json")) for s in signals if s.kind in KINDS}

        raw = asyncio.run(
            collect(
                kafka_bootstrap,
                topics.SIGNALS.full_name(topic_prefix),
                done=lambda got: len(relevant(got)) >= len(ours),
                timeout_s=240,
                settle_s=3.0,
            )
        )
        assert relevant(raw) == ours, (tmp_path / "worker.log").read_text()[-3000:]
    finally:
        proc.terminate()
        proc.wait(60)
