"""The scripted OOM incident through the real broker and a Faust worker gives the signals the
embedded runner gives: the storm on the time-sliced card (aggressor and victims), the node
storm of the kernel's OOM kills (which the worker's node stage reads from the scheduler events'
topic), a card taken out by an XID, their resolutions and times, evidence included."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from models import (
    Envelope,
    GpuSample,
    GpuSampleEvent,
    NodeEvent,
)
from tests.distributed.runner_signals import embedded_signals, worker_signals
from tests.streams.kernel_ooms import kernel_incident
from tests.streams.oom_incident import incident, node

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


def test_the_incident_through_kafka_and_faust_gives_the_embedded_signals(
    kafka_bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    envs = events()
    ours = embedded_signals(envs, KINDS)
    # the card storm, the node storm and the XID, each opened and resolved
    assert sorted((k[1], k[2]) for k in ours) == [
        ("gpu_unhealthy", "open"),
        ("oom_storm", "open"),
        ("oom_storm", "open"),
        ("oom_storm", "resolved"),
        ("oom_storm", "resolved"),
    ]
    theirs, log = worker_signals(
        kafka_bootstrap, topic_prefix, envs, KINDS, expect=len(ours), work=tmp_path
    )
    assert theirs == ours, log
