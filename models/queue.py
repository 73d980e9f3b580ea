"""Quota and queue objects (namespace ResourceQuotas, Kueue and Volcano queues, gangs and
workloads) reduced to what explains why GPU capacity that looks free cannot be used by a queue."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import Field

from models.base import Frozen
from models.bounds import COUNT_MAX, Count, QuotaAmount

__all__ = ["QueueObject", "QueueSourceKind"]

NonEmpty = Annotated[str, Field(min_length=1)]
Amounts = dict[str, QuotaAmount]


class QueueSourceKind(StrEnum):
    """Which Kubernetes object a queue record came from; quota semantics differ per kind."""

    RESOURCE_QUOTA = "ResourceQuota"
    CLUSTER_QUEUE = "ClusterQueue"
    LOCAL_QUEUE = "LocalQueue"
    WORKLOAD = "Workload"
    POD_GROUP = "PodGroup"
    VOLCANO_QUEUE = "VolcanoQueue"


class QueueObject(Frozen):
    """One quota-bearing object. Amounts are keyed by the resource name as pods request it
    (``nvidia.com/gpu``, ``nvidia.com/mig-1g.10gb``, ``nvidia.com/gpumem``; a ResourceQuota's
    ``requests.`` prefix is dropped) and keep only GPU-related resources, because the CPU and
    memory side of a quota is not what strands GPUs."""

    source_kind: QueueSourceKind
    namespace: str | None = None
    """None for cluster-scoped objects (ClusterQueue, Volcano Queue)."""
    name: NonEmpty
    uid: str = ""
    parent: str | None = None
    """The queue this object draws from: LocalQueue -> ClusterQueue, Workload -> LocalQueue,
    PodGroup -> Volcano Queue, Volcano Queue -> its parent queue (hierarchical queues)."""
    cohort: str | None = None
    """Kueue cohort: the ClusterQueues that may borrow each other's unused quota."""
    nominal: Amounts = Field(default_factory=dict)
    """What the object is entitled to: ResourceQuota hard, Kueue nominalQuota (summed over
    flavors), Volcano deserved."""
    limit: Amounts = Field(default_factory=dict)
    """Hard ceiling including borrowing: ResourceQuota hard, Kueue nominal + borrowingLimit
    (absent where borrowing is unbounded), Volcano capability."""
    used: Amounts = Field(default_factory=dict)
    requested: Amounts = Field(default_factory=dict)
    """Demand of a Workload (all pod sets) or a PodGroup's minResources."""
    min_member: Annotated[int, Field(ge=1, le=COUNT_MAX)] | None = None
    """PodGroup gang size: pods that must be placed together."""
    state: str | None = None
    """The object's own phase or state word (PodGroup Pending/Inqueue/Running, Queue
    Open/Closed, Workload Pending/QuotaReserved/Admitted/Finished, ClusterQueue Active/Inactive)."""
    pending: Count | None = None
    """Workloads (Kueue) or pod groups (Volcano) waiting in this queue."""
    admitted: Count | None = None
    """Workloads admitted (Kueue) or pod groups running (Volcano) in this queue."""

    @property
    def key(self) -> str:
        """Partition key "<kind>:<namespace>/<name>" (no namespace for cluster-scoped objects);
        the colon keeps it apart from pod keys and node names, which cannot contain one."""
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.source_kind.value}:{where}"
