"""A pod as the sources report it: the unit whose placement gpufrag explains."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import Field, model_validator

from models.base import Frozen, UtcDatetime
from models.bounds import COUNT_MAX, GpuIndex, GpuMemoryMib, Priority
from models.gpu import GpuModel
from models.node import Toleration
from models.resources import ResourceRequest

__all__ = ["GangRef", "OwnerRef", "Pod", "PodPhase", "QosClass", "WorkloadKind"]

NonEmpty = Annotated[str, Field(min_length=1)]


class PodPhase(StrEnum):
    """Kubernetes pod phases, values as the API spells them."""

    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNKNOWN = "Unknown"


class QosClass(StrEnum):
    """Kubernetes QoS classes plus Alibaba's LS/BE, kept verbatim so traces replay unchanged."""

    GUARANTEED = "Guaranteed"
    BURSTABLE = "Burstable"
    BEST_EFFORT = "BestEffort"
    LS = "LS"
    BE = "BE"


class WorkloadKind(StrEnum):
    """Coarse kind: reclaim policy treats an idle notebook differently from a training job."""

    TRAINING = "training"
    INFERENCE = "inference"
    NOTEBOOK = "notebook"
    BATCH = "batch"
    UNKNOWN = "unknown"


class OwnerRef(Frozen):
    """The controller that owns the pod, so actions can name the job rather than a replica."""

    kind: NonEmpty
    name: NonEmpty


class GangRef(Frozen):
    """Gang membership: a gang is unplaceable unless `min_member` pods fit at once."""

    name: NonEmpty
    min_member: Annotated[int, Field(ge=1, le=COUNT_MAX)]


class Pod(Frozen):
    """A pod's scheduling-relevant state; `gpu_indices` say which cards it holds once bound."""

    namespace: NonEmpty = "default"
    name: NonEmpty
    uid: str
    phase: PodPhase
    node: str | None = None
    requests: ResourceRequest
    gpu_models: tuple[GpuModel, ...] = ()
    """Allowed GPU models; empty means any."""
    gpu_indices: tuple[GpuIndex, ...] = ()
    gpu_memory_limit_mib: GpuMemoryMib | None = None
    """GPU memory the pod may use per card where something enforces it (HAMi's gpumem, CUDA
    MPS's pinned device memory limit): past it the pod gets out-of-memory errors."""
    priority: Priority = 0
    queue: str | None = None
    tenant: str | None = None
    owner: OwnerRef | None = None
    qos: QosClass | None = None
    gang: GangRef | None = None
    tolerations: tuple[Toleration, ...] = ()
    workload_kind: WorkloadKind = WorkloadKind.UNKNOWN
    preemptible: bool = False
    labels: dict[str, str] = Field(default_factory=dict)
    """The pod's labels; the guardrails read the exempt label (``gpufrag.io/exempt``)."""
    created_at: UtcDatetime

    @model_validator(mode="after")
    def _indices_need_node(self) -> Pod:
        if self.gpu_indices and self.node is None:
            raise ValueError("gpu_indices set but node is None: devices exist only once bound")
        if len(set(self.gpu_indices)) != len(self.gpu_indices):
            raise ValueError(f"gpu_indices has duplicates: {self.gpu_indices}")
        return self

    @property
    def key(self) -> str:
        """The partition key for pod events: "namespace/name"."""
        return f"{self.namespace}/{self.name}"
