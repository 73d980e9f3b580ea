"""One GPU's NVML readings as plain values, and their mapping to GpuSample.

Kept apart from the NVML calls so the mapping is tested on real readings (the H200 fixtures)
on machines without a GPU.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from pydantic import ValidationError

from models import GpuSample
from models.bounds import describe

MIB = 1024 * 1024
_BOUND_ERRORS = frozenset(
    {"less_than_equal", "greater_than_equal", "less_than", "greater_than", "finite_number"}
)


@dataclass(frozen=True, slots=True)
class ProcessUse:
    pid: int
    used_bytes: int | None  # None: the driver would not say (e.g. in some containers)


@dataclass(frozen=True, slots=True)
class PodRef:
    namespace: str
    pod: str
    container: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class NvmlReading:
    index: int
    uuid: str | None
    name: str | None
    memory_total_bytes: int | None
    memory_used_bytes: int | None
    memory_reserved_bytes: int | None = None
    gpu_util_pct: float | None = None
    memory_util_pct: float | None = None
    ecc_uncorrected_volatile: int | None = None
    rows_remapped_correctable: int | None = None
    rows_remapped_uncorrectable: int | None = None
    row_remap_pending: bool | None = None
    row_remap_failed: bool | None = None
    mig_enabled: bool | None = None
    xid: int | None = None
    processes: tuple[ProcessUse, ...] = field(default=())
    mig_uuids: tuple[str, ...] = field(default=())
    """UUIDs of the card's MIG devices: the kubelet assigns those, not the card."""


@dataclass(frozen=True, slots=True)
class Refused:
    """A reading that makes no valid sample: ``reason`` the stable code (``out_of_range`` for
    a value no card can have, ``value`` for values impossible together, such as used above
    total), ``detail`` one line naming the card and the field."""

    reason: str
    detail: str


def _mib(value: int | None) -> float | None:
    # NVML's byte counts are 64-bit, so the quotient is below 2**44; a value past any float
    # (only a broken binding could give one) is refused by the sample's finite-number rule.
    if value is None:
        return None
    try:
        return value / MIB
    except OverflowError:
        return float("inf")


def card_owner(assigned: frozenset[PodRef]) -> PodRef | None:
    """The one pod the kubelet gave the card to; none when pods share it (time-slicing), since
    a card-level sample cannot split its memory between them. Two containers of one pod
    holding replicas of the card leave the container unnamed."""
    pods = {(r.namespace, r.pod) for r in assigned}
    if len(pods) != 1:
        return None
    (namespace, pod), containers = next(iter(pods)), {r.container for r in assigned}
    return PodRef(namespace, pod, next(iter(containers)) if len(containers) == 1 else None)


def process_pods(
    reading: NvmlReading,
    *,
    pod_of_pid: Callable[[int], PodRef | None],
    assigned: frozenset[PodRef] = frozenset(),
) -> tuple[tuple[ProcessUse, PodRef | None], ...]:
    """Each process with its own memory and its pod: the card's one assignee where the kubelet
    names one (a process on a card sees only the devices its container was given), else the
    pod UID of its cgroup."""
    owner = card_owner(assigned)
    return tuple((p, owner or pod_of_pid(p.pid)) for p in reading.processes)


def to_sample(
    node: str,
    reading: NvmlReading,
    *,
    pod_of_pid: Callable[[int], PodRef | None],
    assigned: frozenset[PodRef] = frozenset(),
) -> GpuSample:
    """A card-level sample. Its pod: the kubelet's assignment when the card has one (see
    ``card_owner``); otherwise the pod of every process on the card when they are all in one
    pod, the same whole-card attribution dcgm-exporter makes."""
    users = process_pods(reading, pod_of_pid=pod_of_pid, assigned=assigned)
    if assigned:
        owner = card_owner(assigned)
    else:
        pods = {pod for _, pod in users}
        owner = next(iter(pods)) if len(pods) == 1 else None
    return GpuSample(
        node=node,
        gpu_index=reading.index,
        uuid=reading.uuid,
        model=reading.name,
        memory_total_mib=_mib(reading.memory_total_bytes),
        memory_used_mib=_mib(reading.memory_used_bytes),
        memory_reserved_mib=_mib(reading.memory_reserved_bytes),
        utilization_pct=reading.gpu_util_pct,
        xid=reading.xid,
        xid_from="events",
        ecc_uncorrected_volatile=reading.ecc_uncorrected_volatile,
        rows_remapped_correctable=reading.rows_remapped_correctable,
        rows_remapped_uncorrectable=reading.rows_remapped_uncorrectable,
        row_remap_pending=reading.row_remap_pending,
        row_remap_failed=reading.row_remap_failed,
        pod=owner.pod if owner else None,
        namespace=owner.namespace if owner else None,
        container=owner.container if owner else None,
        pod_memory_mib=_pod_memory(users),
    )


def _pod_memory(users: tuple[tuple[ProcessUse, PodRef | None], ...]) -> dict[str, float] | None:
    """MiB per pod summed over its processes; None when no process's pod and memory are both
    known (a driver that hides per-process memory in containers)."""
    out: dict[str, float] = {}
    for proc, pod in users:
        if pod is None or proc.used_bytes is None:
            continue
        key = f"{pod.namespace}/{pod.pod}" if pod.namespace else pod.pod
        out[key] = out.get(key, 0.0) + proc.used_bytes / MIB
    return out or None


def checked_sample(
    node: str,
    reading: NvmlReading,
    *,
    pod_of_pid: Callable[[int], PodRef | None],
    assigned: frozenset[PodRef] = frozenset(),
) -> GpuSample | Refused:
    """``to_sample``, with a reading the sample's bounds refuse returned as Refused naming
    the field, so the sampler can pass the card over and go on with the others."""
    try:
        return to_sample(node, reading, pod_of_pid=pod_of_pid, assigned=assigned)
    except ValidationError as exc:
        bound = all(err["type"] in _BOUND_ERRORS for err in exc.errors())
        return Refused(
            "out_of_range" if bound else "value", f"GPU {reading.index}: {describe(exc)}"
        )
