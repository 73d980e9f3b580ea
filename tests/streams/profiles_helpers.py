"""Small builders for node and task profiles in hand-computed tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from pydantic import BaseModel

from models import (
    DetectorSettings,
    GangRef,
    GpuState,
    NodeProfile,
    PodPhase,
    ResourceRequest,
    Taint,
    TaskProfile,
    Toleration,
)

T0 = datetime(2024, 1, 1, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def node(
    name: str,
    *,
    gpus: tuple[int, ...] = (),
    model: str | None = "T4",
    cpu_free: int = 32_000,
    mem_free: int = 131_072,
    taints: tuple[Taint, ...] = (),
    unschedulable: bool = False,
    healthy: tuple[bool, ...] | None = None,
) -> NodeProfile:
    """A node whose free resources are given directly (allocatable 64 cores, 256 GiB)."""
    return NodeProfile(
        name=name,
        gpu_model=model if gpus else None,
        gpus=tuple(
            GpuState(index=i, milli_free=free, healthy=True if healthy is None else healthy[i])
            for i, free in enumerate(gpus)
        ),
        cpu_milli_allocatable=64_000,
        cpu_milli_requested=64_000 - cpu_free,
        memory_mib_allocatable=262_144,
        memory_mib_requested=262_144 - mem_free,
        taints=taints,
        unschedulable=unschedulable,
        updated_at=T0,
    )


def task(
    key: str,
    *,
    cpu: int = 1_000,
    mem: int = 1_024,
    gpus: int = 0,
    milli: int = 0,
    models: tuple[str, ...] = (),
    node_name: str | None = None,
    phase: PodPhase = PodPhase.PENDING,
    gang: GangRef | None = None,
    tolerations: tuple[Toleration, ...] = (),
) -> TaskProfile:
    return TaskProfile(
        key=key,
        uid=key,
        requests=ResourceRequest(cpu_milli=cpu, memory_mib=mem, gpu_count=gpus, gpu_milli=milli),
        gpu_models=models,
        phase=phase,
        node=node_name,
        gang=gang,
        tolerations=tolerations,
        created_at=T0,
    )


def only_detector(name: str, settings: BaseModel | None = None) -> DetectorSettings:
    """Detector settings with every detector but ``name`` turned off (``settings``: its own
    group, else its defaults), so a scenario table lists that detector's signals alone."""
    groups: dict[str, object] = {}
    for field, info in DetectorSettings.model_fields.items():
        if field == "extensions":  # plugins' detectors: none registered in these tests
            continue
        group = info.default
        if field == name:
            groups[field] = settings or group
        else:
            groups[field] = group.model_copy(update={"enabled": False})
    return DetectorSettings.model_validate(groups)
