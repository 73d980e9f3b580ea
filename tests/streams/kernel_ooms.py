"""Kernel OOM kills as raw events: a node whose pod's GPU memory grows, then the kubelet's
SystemOOM events for it; and the builders the OOM-source tests share."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from models import (
    Envelope,
    GpuSample,
    GpuSampleEvent,
    Node,
    NodeEvent,
    PayloadModel,
    Pod,
    PodEvent,
    PodPhase,
    ResourceRequest,
    SchedulerEvent,
    SchedulingEvent,
)

T0 = datetime(2026, 12, 2, 5, 0, tzinfo=UTC)


def at(s: float) -> datetime:
    return T0 + timedelta(seconds=s)


def wrap(payload: PayloadModel, s: float) -> Envelope:
    return Envelope.wrap(payload, event_time=at(s), source="test")


def pod(key: str, node: str, *, limit: int | None = None) -> PodEvent:
    ns, name = key.split("/")
    return PodEvent(
        change="upsert",
        pod=Pod(
            namespace=ns,
            name=name,
            uid=f"u-{name}",
            phase=PodPhase.RUNNING,
            node=node,
            gpu_memory_limit_mib=limit,
            requests=ResourceRequest(
                cpu_milli=500, memory_mib=512, gpu_count=1, gpu_milli=1000, gpu_memory_mib=limit
            ),
            created_at=T0,
        ),
    )


def system_oom(pid: int) -> SchedulingEvent:
    return SchedulingEvent(
        event=SchedulerEvent(
            reason="SystemOOM",
            message=f"System OOM encountered, victim process: python3, pid: {pid}",
            node="cpu-gpu-0",
        )
    )


def node_of(name: str, **kw: object) -> Node:
    return Node(
        name=name,
        cpu_milli=64_000,
        memory_mib=262_144,
        gpu_model="V100M32",
        gpu_count=1,
        gpu_memory_mib=32_768,
        **kw,  # type: ignore[arg-type]
    )


def hog_reading(mib: float) -> GpuSampleEvent:
    return GpuSampleEvent(
        sample=GpuSample(
            node="cpu-gpu-0",
            gpu_index=0,
            memory_total_mib=32_768.0,
            memory_used_mib=mib,
            pod_memory_mib={"batch/hog": mib},
        )
    )


def kernel_incident(kills: int) -> list[Envelope]:
    out = [
        wrap(NodeEvent(change="upsert", node=node_of("cpu-gpu-0")), 0),
        wrap(pod("batch/hog", "cpu-gpu-0"), 1),
        wrap(hog_reading(1_000), 10),
        wrap(hog_reading(20_000), 40),
    ]
    return out + [wrap(system_oom(4_000 + i), 60 + 10 * i) for i in range(kills)]
