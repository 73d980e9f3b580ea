"""Real model instances for the store tests, with millisecond times (DateTime64(3) keeps ms)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from models import (
    Action,
    ActionKind,
    ActionOutcome,
    Envelope,
    GpuSample,
    GpuSampleEvent,
    GpuState,
    NodeProfile,
    PodPhase,
    ResourceRequest,
    Scope,
    Severity,
    Signal,
    SignalKind,
    TaskProfile,
    fingerprint_of,
)
from models.analysis import ClusterFragmentation

SUMMARY = ClusterFragmentation(
    nodes=2,
    capacity_gpus=16.0,
    idle_gpus=6.0,
    frag_gpus=3.0,
    frag_amount_pct=18.75,
    frag_ratio_pct=50.0,
    typical_pods=3,
    pending_pods=1,
    unplaceable_pods=1,
    stranded_nodes=0,
)
"""A cluster's fragmentation figures for the row and history tests."""

T0 = datetime(2024, 3, 1, 12, 0, 0, 125_000, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def gpu_sample_env(i: int, *, node: str = "gpu-node-1", days: int = 0) -> Envelope:
    sample = GpuSample(
        node=node,
        gpu_index=i % 8,
        uuid=f"GPU-{i:08x}" if i % 3 else None,
        model="NVIDIA H200" if i % 2 else None,
        memory_total_mib=143_771.0,
        memory_used_mib=float(1000 + i),
        utilization_pct=float(i % 100) if i % 4 else None,
        xid=79 if i == 5 else None,
        pod=f"job-{i}" if i % 2 else None,
        namespace="ml" if i % 2 else None,
    )
    return Envelope.wrap(
        GpuSampleEvent(sample=sample),
        event_time=at(i) + timedelta(days=days),
        source="dcgm",
    )


def node_profile(name: str = "gpu-node-1") -> NodeProfile:
    return NodeProfile(
        name=name,
        gpu_model="H200",
        gpus=(
            GpuState(index=0, milli_free=1000),
            GpuState(index=1, milli_free=500, memory_total_mib=143_771.0, memory_used_mib=10.5),
            GpuState(index=2, milli_free=1000, healthy=False, last_xid=79),
        ),
        cpu_milli_allocatable=64_000,
        cpu_milli_requested=8_000,
        memory_mib_allocatable=262_144,
        memory_mib_requested=300_000,
        labels={"pool": "train"},
        pool="train",
        unschedulable=True,
        pods=("ml/b", "ml/a"),
        updated_at=at(1),
    )


def task_profile(key: str = "ml/job-1", *, bound: bool = True) -> TaskProfile:
    return TaskProfile(
        key=key,
        uid="uid-1",
        requests=ResourceRequest(cpu_milli=4000, memory_mib=16_384, gpu_count=1, gpu_milli=500),
        gpu_models=("H200",),
        queue="research",
        tenant="team-a" if bound else None,
        phase=PodPhase.RUNNING if bound else PodPhase.PENDING,
        node="gpu-node-1" if bound else None,
        gpu_indices=(1,) if bound else (),
        created_at=at(0),
        bound_at=at(42.5) if bound else None,
        oom_count=2,
    )


def signal(i: int = 0, *, resolved: bool = False) -> Signal:
    opened = Signal(
        kind=SignalKind.OOM_STORM,
        scope=Scope.NODE,
        scope_id=f"gpu-node-{i}",
        severity=Severity.CRITICAL,
        fingerprint=fingerprint_of(SignalKind.OOM_STORM, Scope.NODE, f"gpu-node-{i}"),
        summary=f"OOM storm on gpu-node-{i}",
        evidence={"kills": 7, "pods": ["ml/a", "ml/b"], "window_s": 60.0, "aggressor": None},
        opened_at=at(i),
    )
    return opened.resolved(at(i + 90)) if resolved else opened


def action(i: int = 0) -> Action:
    sig = signal(i)
    return Action(
        id=f"act-{i}",
        kind=ActionKind.EVICT_AGGRESSOR,
        outcome=ActionOutcome.PROPOSED,
        target_scope=Scope.POD,
        target="ml/a",
        signal_fingerprint=sig.fingerprint,
        reason="pod ml/a took all GPU memory on a time-sliced card",
        evidence={"memory_used_mib": 143_000, "neighbours_killed": 3},
        created_at=at(i + 5),
    )
