"""Joined state the profiles operator keeps per node and per task: what every analysis reads."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import Field, NonNegativeInt, field_validator, model_validator

from models.base import Resident, UtcDatetime
from models.bounds import Count, CpuMilli, GpuIndex, MemoryMib, Priority, XidCode
from models.cards import SharingMode
from models.gpu import MILLI_PER_GPU, GpuModel
from models.node import Taint, Toleration
from models.pod import GangRef, Pod, PodPhase, WorkloadKind
from models.resources import ResourceRequest
from models.scheduler import PendingVerdict, Preemption

__all__ = ["GpuState", "NodeProfile", "TaskProfile"]

NonNegFloat = Annotated[float, Field(ge=0)]


class GpuState(Resident):
    """One card in its node's sharing mode: what is allocated and free in that mode's units,
    its telemetry, and its health (an unhealthy card's free share is not usable)."""

    index: GpuIndex
    milli_free: Annotated[int, Field(ge=0, le=MILLI_PER_GPU)]
    """What of the card can still be handed out, in 1/1000 of a card, whatever the mode: the
    figure the fragmentation measure weighs."""
    mode: SharingMode = SharingMode.MILLI
    units: Annotated[int, Field(ge=1)] = MILLI_PER_GPU
    """The card in its mode's units: 1000 milli (exclusive, milli, HAMi cores), R replicas
    (time-sliced) or compute slices (MIG: 7, or 4 on an A30)."""
    units_free: NonNegativeInt | None = None
    """Free in those units; None (profiles written before modes): ``milli_free``."""
    mig_free: dict[str, NonNegativeInt] = Field(default_factory=dict)
    """MIG: free instances by profile."""
    mig_used: dict[str, NonNegativeInt] = Field(default_factory=dict)
    memory_free_mib: NonNegativeInt | None = None
    """HAMi: card memory not yet promised to a vGPU."""
    slots_free: NonNegativeInt | None = None
    """HAMi: vGPUs of its split count still to hand out."""
    pods: tuple[str, ...] = ()
    """Pods holding a share of this card: on a shared card, whose usage the figure is."""
    pod_memory_mib: dict[str, NonNegFloat] = Field(default_factory=dict)
    """Each pod's own GPU memory on this card, where a reading names it (NVML's per-process
    figures, or the one pod of a card or MIG instance)."""
    memory_total_mib: NonNegFloat | None = None
    memory_used_mib: NonNegFloat | None = None
    instance_memory_used_mib: dict[int, NonNegFloat] = Field(default_factory=dict)
    """MIG: each instance's own reading (DCGM's GPU_I_ID -> MiB used); the card's figure is
    their sum."""
    healthy: bool = True
    """Takes new work: no fault on the card, no problem condition on its node, and no DRA
    device taint that keeps work off it (``Node.card_taints``)."""
    last_xid: XidCode | None = None
    fault: str | None = None
    """What took the card out (a fatal XID, uncorrectable ECC errors, a row remap pending or
    failed), until the evidence clears (``streams/profiles/health.py``)."""
    fault_code: XidCode | None = None
    """The XID of ``fault`` when an XID is what it is."""
    fault_since: UtcDatetime | None = None
    quiet_since: UtcDatetime | None = None
    """Start of the card's current run of readings below the idle activity, without gaps
    (``streams/profiles/quiet.py``); None: not quiet, or no activity figure."""
    quiet_held: bool = False
    """The run has lasted the idle window."""
    quiet_peak_mib: NonNegFloat | None = None
    quiet_peak_activity_pct: Annotated[float, Field(ge=0, le=100)] | None = None

    @property
    def free_units(self) -> int:
        return self.milli_free if self.units_free is None else self.units_free

    @property
    def alloc_fraction(self) -> float:
        """The allocated share of the card: one of R replicas counts 1/R, a MIG instance its
        slices of the card's; on HAMi the larger of the core and the memory share promised."""
        share = 1.0 - min(self.free_units, self.units) / self.units
        if self.mode is SharingMode.HAMI and self.memory_free_mib is not None:
            total = self.memory_total_mib
            if total:
                share = max(share, 1.0 - min(self.memory_free_mib, total) / total)
        return share

    @property
    def memory_shared(self) -> bool:
        """Several pods on one card without memory isolation: the card's memory figure is
        theirs together, not any one pod's."""
        return len(self.pods) > 1 and self.mode is not SharingMode.MIG


class NodeProfile(Resident):
    """A node joined with the pods bound to it: the input of fragmentation analysis."""

    name: Annotated[str, Field(min_length=1)]
    gpu_model: GpuModel | None = None
    gpus: tuple[GpuState, ...] = ()
    cpu_milli_allocatable: CpuMilli
    cpu_milli_requested: NonNegativeInt = 0
    memory_mib_allocatable: MemoryMib
    memory_mib_requested: NonNegativeInt = 0
    labels: dict[str, str] = Field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    pool: str | None = None
    unschedulable: bool = False
    problems: dict[str, str] = Field(default_factory=dict)
    """As Node.problems."""
    mig_device_profile: str | None = None
    """As Node.mig_device_profile: a pod's whole-GPU request takes an instance of it."""
    gpu_shared_resource: bool = False
    """As Node.gpu_shared_resource."""
    gpu_dra: bool = Field(default=False, exclude_if=lambda v: not v)
    """As Node.gpu_dra (and left out of the JSON when false, as there)."""
    pods: tuple[str, ...] = ()
    """Keys ("namespace/name") of pods bound here, sorted so equal states compare equal."""
    system_oom_count: NonNegativeInt = 0
    """Kills by the node's kernel OOM killer (the kubelet's SystemOOM events) seen so far."""
    last_system_oom: str | None = None
    """The last one's victim, "node: process (pid N)"."""
    updated_at: UtcDatetime

    @field_validator("pods")
    @classmethod
    def _sorted_unique(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(value)) != len(value):
            raise ValueError("pods has duplicate keys")
        return tuple(sorted(value))

    @model_validator(mode="after")
    def _gpus_consistent(self) -> NodeProfile:
        indices = [g.index for g in self.gpus]
        if len(set(indices)) != len(indices):
            raise ValueError(f"gpus has duplicate indices: {indices}")
        if self.gpus and self.gpu_model is None:
            raise ValueError("gpu_model is required when gpus is non-empty")
        return self

    @property
    def cpu_milli_free(self) -> int:
        """Never negative: requests can exceed allocatable after allocatable shrinks."""
        return max(0, self.cpu_milli_allocatable - self.cpu_milli_requested)

    @property
    def memory_mib_free(self) -> int:
        """Never negative, for the same reason as cpu_milli_free."""
        return max(0, self.memory_mib_allocatable - self.memory_mib_requested)

    @property
    def gpu_milli_free_total(self) -> int:
        """Free GPU share on healthy cards only: a broken card's share cannot be placed on."""
        return sum(g.milli_free for g in self.gpus if g.healthy)

    @property
    def full_free_gpus(self) -> int:
        """Healthy whole cards with nothing on them: what whole-card jobs need (a MIG card
        serves only its instances)."""
        return sum(
            1
            for g in self.gpus
            if g.healthy and g.mode is not SharingMode.MIG and g.milli_free == MILLI_PER_GPU
        )

    def pod_memory(self) -> dict[str, tuple[int, float]]:
        """Each pod's own GPU memory where a reading names it: pod -> (card index, MiB), the
        card where it holds the most (a limit and a growth are per card, not summed)."""
        out: dict[str, tuple[int, float]] = {}
        for g in self.gpus:
            for pod, mib in g.pod_memory_mib.items():
                if pod not in out or mib > out[pod][1]:
                    out[pod] = (g.index, mib)
        return out

    @property
    def gpus_allocated(self) -> float:
        """Allocated share in card units, summed over the cards."""
        return sum(g.alloc_fraction for g in self.gpus)


class TaskProfile(Resident):
    """A pod's request joined with its history (binding, finish, OOMs). Its GPU memory peak is
    not here: the node's stage sees the samples, in order, and stores the peak apart
    (``task_memory_peaks``), so both runners keep it for a pod of any life span."""

    key: Annotated[str, Field(pattern=r"^[^/]+/[^/]+$")]
    """Same as Pod.key: "namespace/name"."""
    uid: str
    requests: ResourceRequest
    gpu_models: tuple[GpuModel, ...] = ()
    priority: Priority = 0
    queue: str | None = None
    tenant: str | None = None
    workload_kind: WorkloadKind = WorkloadKind.UNKNOWN
    preemptible: bool = False
    labels: dict[str, str] = Field(default_factory=dict)
    phase: PodPhase
    node: str | None = None
    gpu_indices: tuple[NonNegativeInt, ...] = ()
    gpu_memory_limit_mib: NonNegativeInt | None = None
    """As Pod.gpu_memory_limit_mib: what its memory figure is measured against."""
    gang: GangRef | None = None
    tolerations: tuple[Toleration, ...] = ()
    created_at: UtcDatetime
    bound_at: UtcDatetime | None = None
    finished_at: UtcDatetime | None = None
    oom_count: NonNegativeInt = 0
    counted_ooms: tuple[str, ...] = ()
    """Ids of the latest OOM-kill events counted (a few): at-least-once delivery and a
    watcher's re-list bring the same kill again, and it must not count twice."""
    scheduler: PendingVerdict | None = None
    """kube-scheduler's latest FailedScheduling verdict while the pod waits; dropped once it
    is bound (what kept it waiting is over), so a running pod's profile carries none."""
    preemptions: Count = 0
    preempted: Preemption | None = None
    """The latest time the scheduler preempted this pod, and for whom."""

    @model_validator(mode="before")
    @classmethod
    def _drop_legacy_peak(cls, data: Any) -> Any:
        """Profiles stored before the peak moved to the node's stage (tables, changelogs,
        history rows) carry it; it is dropped on read rather than refused, so they still load."""
        if isinstance(data, dict) and "gpu_memory_peak_mib" in data:
            return {k: v for k, v in data.items() if k != "gpu_memory_peak_mib"}
        return data

    @classmethod
    def of_pod(cls, pod: Pod, **history: Any) -> TaskProfile:
        """The pod's own state as its profile carries it, with what only the profile knows
        (``history``: bind and finish times, OOMs, verdicts): the one place a
        pod's fields are carried over, so a field added to both is copied everywhere."""
        own = {name: getattr(pod, name) for name in FROM_POD}
        return cls.model_validate({"key": pod.key, **own, **history})

    @property
    def wait_s(self) -> float | None:
        """Queueing delay in seconds; None while still unbound."""
        if self.bound_at is None:
            return None
        return _seconds(self.bound_at, self.created_at)


def _seconds(later: datetime, earlier: datetime) -> float:
    return (later - earlier).total_seconds()


FROM_POD = (
    "uid",
    "requests",
    "gpu_models",
    "priority",
    "queue",
    "tenant",
    "workload_kind",
    "preemptible",
    "labels",
    "phase",
    "node",
    "gpu_indices",
    "gpu_memory_limit_mib",
    "gang",
    "tolerations",
    "created_at",
)
"""The fields a task profile copies from its pod, under the same names."""
