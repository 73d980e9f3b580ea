"""The issue's scripted OOM incident as raw events: one aggressor on a time-sliced card whose
memory grows in NVML's per-process readings (pods known by their cgroup's uid), four victims
OOM-killed within a minute, and two unrelated OOMs on an exclusive node."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from connectors.gpu.reading import NvmlReading, PodRef, ProcessUse, to_sample
from models import (
    Envelope,
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
from models.cards import SharingMode

T0 = datetime(2026, 12, 2, 1, 0, tzinfo=UTC)
MIB = 1024 * 1024
AGGRESSOR = "notebooks/greedy"
VICTIMS = [f"serving/v{i}" for i in range(1, 5)]
SHARED = (AGGRESSOR, *VICTIMS)
UID = {
    key: f"0000000{i}-aaaa-4bbb-8ccc-dddddddddddd" for i, key in enumerate([*SHARED, "batch/solo"])
}
PID = {key: 100 + i for i, key in enumerate(SHARED)}


def at(s: float) -> datetime:
    return T0 + timedelta(seconds=s)


def wrap(payload: PayloadModel, s: float, source: str = "kube") -> Envelope:
    return Envelope.wrap(payload, event_time=at(s), source=source)


def node(name: str, **kw: object) -> Node:
    return Node(name=name, cpu_milli=32_000, memory_mib=131_072, gpu_model="T4", gpu_count=1, **kw)  # type: ignore[arg-type]


def pod(key: str, on: str) -> Pod:
    ns, name = key.split("/")
    return Pod(
        namespace=ns,
        name=name,
        uid=UID[key],
        phase=PodPhase.RUNNING,
        node=on,
        requests=ResourceRequest(cpu_milli=500, memory_mib=512, gpu_count=1, gpu_milli=1000),
        created_at=T0,
    )


def reading(greedy_mib: int) -> NvmlReading:
    use = {AGGRESSOR: greedy_mib, **{v: 1_000 for v in VICTIMS}}
    return NvmlReading(
        index=0,
        uuid="GPU-1",
        name="Tesla T4",
        memory_total_bytes=81_920 * MIB,
        memory_used_bytes=sum(use.values()) * MIB,
        processes=tuple(ProcessUse(PID[k], mib * MIB) for k, mib in use.items()),
    )


def by_cgroup(pid: int) -> PodRef:
    key = next(k for k, p in PID.items() if p == pid)
    return PodRef(namespace="", pod=f"uid:{UID[key]}")


def oom(key: str, s: float, on: str) -> Envelope:
    ns, name = key.split("/")
    ev = SchedulerEvent(
        reason="OOMKilled",
        message="container main was OOMKilled (exit code 137)",
        pod_namespace=ns,
        pod_name=name,
        pod_uid=UID[key],
        node=on,
    )
    return wrap(SchedulingEvent(event=ev), s)


def incident() -> list[Envelope]:
    shared = node("ts-0", gpu_replicas=8, gpu_sharing=SharingMode.TIME_SLICED)
    solo = node("ex-1", gpu_sharing=SharingMode.EXCLUSIVE)
    out = [
        wrap(NodeEvent(change="upsert", node=shared), 0),
        wrap(NodeEvent(change="upsert", node=solo), 0),
    ]
    out += [wrap(PodEvent(change="upsert", pod=pod(k, "ts-0")), 1) for k in SHARED]
    out.append(wrap(PodEvent(change="upsert", pod=pod("batch/solo", "ex-1")), 1))
    for s, mib in [(10, 2_000), (40, 20_000), (65, 60_000)]:
        sample = to_sample("ts-0", reading(mib), pod_of_pid=by_cgroup)
        out.append(wrap(GpuSampleEvent(sample=sample), s, source="nvml"))
    out += [oom(v, 70 + 10 * i, "ts-0") for i, v in enumerate(VICTIMS)]
    out += [oom("batch/solo", 75, "ex-1"), oom("batch/solo", 200, "ex-1")]
    return sorted(out, key=lambda e: e.event_time)
