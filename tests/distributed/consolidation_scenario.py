"""A consolidation the acting step plans: two nodes with half-used cards and a two-GPU job that
fits neither (the worker's acting tests and the worker, actuator and sink test)."""

from __future__ import annotations

from datetime import timedelta

from models import Envelope, Node, NodeEvent
from tests.streams.planner_scenarios import CPU, MEM, T0, PodSpec, pod_event


def events() -> list[Envelope]:
    """Two nodes with half-used cards, a two-GPU job that fits neither, and a tick later."""
    out = [
        Envelope.wrap(
            NodeEvent(
                change="upsert",
                node=Node(name=n, cpu_milli=CPU, memory_mib=MEM, gpu_model="A100", gpu_count=2),
            ),
            event_time=T0,
            source="test",
        )
        for n in ("a", "b")
    ]
    pods = [
        PodSpec(name="s1", gpu_milli=500, priority=0, node="a", cards=(1,)),
        PodSpec(name="s2", gpu_milli=500, priority=50, node="b", cards=(0,)),
        PodSpec(name="s3", gpu_milli=500, priority=50, node="b", cards=(1,)),
        PodSpec(name="job", gpu_milli=1000, gpu_count=2, priority=10),
        PodSpec(name="tick", gpu_milli=0, gpu_count=0, namespace="tick", node="a"),
    ]
    for n, spec in enumerate(pods):
        at = T0 + timedelta(seconds=n + 1 if spec.name != "tick" else 120)
        out.append(pod_event(spec, at))
    return out
