"""What the cluster analysis reports: pending-pod explanations and the cluster's fragmentation.

They are the core's outputs that the history store keeps as rows, so they live here, below both
the core that makes them and the connectors that store them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from models.actions import NoFix
from models.profiles import TaskProfile
from models.scheduler import PendingVerdict

__all__ = [
    "BlockReason",
    "ClusterBreakdown",
    "ClusterFragmentation",
    "Explanation",
    "GangFigures",
    "GroupGpus",
    "InstantReport",
    "NearMiss",
    "QuotaBlock",
    "SchedulerCheck",
]


class BlockReason(StrEnum):
    UNSCHEDULABLE = "unschedulable"
    TAINT = "taint"
    GPU_MODEL = "gpu_model"
    CPU = "cpu"
    MEMORY = "memory"
    GPU_COUNT = "gpu_count"  # not enough cards on the node
    GPU_SHARE = "gpu_share"  # enough free GPU on the node, but split across cards
    GPU_MEMORY = "gpu_memory"  # cards with the compute share, none with the memory (HAMi)
    MIG_PROFILE = "mig_profile"  # free MIG instances, but not of the profile asked for
    QUOTA = "quota"  # the namespace's ResourceQuota or the pod's queue has no room: every node


@dataclass(frozen=True, slots=True)
class NearMiss:
    node: str
    reasons: tuple[BlockReason, ...]
    missing_cpu_milli: int
    missing_memory_mib: int
    missing_gpus: int  # cards with room the node lacks


@dataclass(frozen=True, slots=True)
class SchedulerCheck:
    """gpufrag's explanation of a pending pod set beside kube-scheduler's latest verdict on
    it (``streams/fragmentation/verdicts.py`` says when they agree)."""

    verdict: PendingVerdict
    agrees: bool | None
    """None: nothing to compare (the scheduler named only reasons gpufrag does not model)."""
    reason: BlockReason | None
    """The scheduler's main reason in gpufrag's words: the one a disagreement is counted by."""
    disagreement: str = ""
    """What differs, in words; empty when they agree or were not compared."""

    def evidence(self) -> dict[str, object]:
        v = self.verdict
        return {
            "at": v.at.isoformat(),
            "nodes": v.nodes,
            "reasons": dict(v.reasons),
            "message": v.message,
            "agrees": self.agrees,
            "disagreement": self.disagreement,
        }


@dataclass(frozen=True, slots=True)
class QuotaBlock:
    """A quota object with no room for a pending pod, and the figures that show it, so a reader
    of the stored row can say which queue holds the pod and by how much without the queue
    objects at hand. Amounts are in the blocking resource's own units (GPUs for
    ``nvidia.com/gpu``, instances for a MIG profile, MiB for HAMi's ``nvidia.com/gpumem``)."""

    key: str
    """The object, as its kind and name: ``VolcanoQueue:serve``, ``ClusterQueue:team-a``,
    ``ResourceQuota:ml/gpu`` (the scope id of its quota signals)."""
    resource: str
    """The first resource (by name) the pod asks more of than the object has room for."""
    requested: float
    used: float
    nominal: float
    """What it is guaranteed: Kueue ``nominalQuota``, Volcano ``deserved``, ResourceQuota
    ``hard``."""
    limit: float | None
    """Its ceiling with borrowing: Volcano ``capability``, Kueue nominal + ``borrowingLimit``
    (the nominal quota without a cohort), ResourceQuota ``hard``; None: no ceiling of its own,
    only what its cohort has free."""
    room: float
    """What it could still take, counting what it could borrow: less than ``requested``."""

    def evidence(self) -> dict[str, object]:
        return {
            "key": self.key,
            "resource": self.resource,
            "requested": self.requested,
            "used": self.used,
            "nominal": self.nominal,
            "limit": self.limit,
            "room": self.room,
        }


@dataclass(frozen=True, slots=True)
class GangFigures:
    """A gang's own figures beside the explanation of one of its members: a gang starts
    only when ``min_member`` of its pods run at once, so whether it waits is a count, and
    its reasons are those of the member that found no room."""

    name: str
    min_member: int
    bound: int
    """Members already bound to a node (pending or running there)."""
    members: tuple[str, ...]
    """The pending members' keys, sorted."""
    placeable_together: int
    """Of the ``needed`` members, how many found room together, largest first."""
    needed: int
    """Members still to place: ``min_member`` less those bound."""
    shown: str
    """The member whose request and reasons the explanation carries: the first that found no
    room, or, when all fit together, the largest (the one placed first)."""


@dataclass(frozen=True, slots=True)
class Explanation:
    """A pending request checked against the whole cluster."""

    fits_cluster_total: bool  # the free totals would cover it
    fits_some_node: bool
    blocking: tuple[tuple[BlockReason, int], ...]  # (reason, nodes), most common first
    near_misses: tuple[NearMiss, ...]
    nodes_checked: int
    scheduler: SchedulerCheck | None = None
    """The scheduler's own verdict on the pod, when it gave one while the pod waited."""
    quota: tuple[str, ...] = ()
    """Keys of the quota objects with no room for the pod (``ResourceQuota:ml/gpu``,
    ``ClusterQueue:team-a``); ``blocking`` then names ``quota`` on every node checked."""
    quota_blocks: tuple[QuotaBlock, ...] = ()
    """The same objects with their figures, in the same order. A field of its own beside
    ``quota`` rather than in its place, so a report encoded by a worker of the previous
    version (keys only) still decodes."""
    evaluated_at: datetime | None = None
    """When gpufrag checked the pod against the cluster. A verdict joined later is stored on
    this instant's row, so the row says when each of the two was made (None: a report encoded
    before the field; its row takes the report's instant)."""
    gang: GangFigures | None = None
    """Set on a gang's explanation (keyed ``namespace/gang:NAME``): its figures. Its
    ``fits_some_node`` then says the needed members fit together, and ``blocking`` and
    ``near_misses`` are those of ``gang.shown`` checked alone."""
    no_fix: tuple[NoFix, ...] = ()
    """Why no planner found a plan for the pod, one entry per planner that searched: set by
    the acting step on the explanation of the instant it planned (the pod's unplaceable
    signal opening), empty at every other evaluation and where actions are off."""

    @property
    def unplaceable(self) -> bool:
        """The fragmentation case: enough free in total, no node that can take it."""
        return self.fits_cluster_total and not self.fits_some_node

    def evidence(self) -> dict[str, object]:
        out: dict[str, object] = {
            "fits_cluster_total": self.fits_cluster_total,
            "nodes_checked": self.nodes_checked,
            "blocking": {r.value: n for r, n in self.blocking},
            "near_misses": [
                {
                    "node": m.node,
                    "reasons": [r.value for r in m.reasons],
                    "missing_cpu_milli": m.missing_cpu_milli,
                    "missing_memory_mib": m.missing_memory_mib,
                    "missing_gpus": m.missing_gpus,
                }
                for m in self.near_misses
            ],
        }
        if self.scheduler is not None:
            out["scheduler"] = self.scheduler.evidence()
        if self.quota:
            out["quota"] = list(self.quota)
        if self.quota_blocks:
            out["quota_blocks"] = [b.evidence() for b in self.quota_blocks]
        return out


@dataclass(frozen=True, slots=True)
class ClusterFragmentation:
    nodes: int
    capacity_gpus: float
    idle_gpus: float
    frag_gpus: float
    frag_amount_pct: float
    frag_ratio_pct: float
    typical_pods: int
    pending_pods: int
    unplaceable_pods: int
    stranded_nodes: int
    arrived_gpus: float = 0.0
    """GPU demand of every pod seen so far (``ClusterView.arrived_gpu_milli``)."""
    stranded_gpus: float = 0.0
    """Idle GPU on the stranded nodes (part of ``idle_gpus``)."""

    @property
    def alloc_pct(self) -> float:
        """GPU allocated, in % of the cluster's GPUs (unhealthy cards count as allocated)."""
        cap = self.capacity_gpus
        return (cap - self.idle_gpus) / cap * 100.0 if cap else 0.0

    @property
    def arrived_pct(self) -> float | None:
        """Arrived GPU demand in % of the cluster's GPUs: the FGD paper's x axis."""
        cap = self.capacity_gpus
        return self.arrived_gpus / cap * 100.0 if cap else None


@dataclass(frozen=True, slots=True)
class GroupGpus:
    """The GPUs of one pool and GPU model, split four ways that add up to its cards:
    allocated (held by pods), idle (free and usable), stranded (free on a node with too
    little CPU or memory left for any typical GPU pod) and unhealthy (out of service)."""

    pool: str
    gpu_model: str
    allocated: float
    idle: float
    stranded: float
    unhealthy: float


@dataclass(frozen=True, slots=True)
class ClusterBreakdown:
    """The cluster's figures by bounded labels, for a host's gauges: each set is as small as
    the cluster's pools and models, the block reasons, or the signal kinds and severities,
    never one entry per pod or node."""

    gpus: tuple[GroupGpus, ...] = ()
    unplaceable: tuple[tuple[str, int], ...] = ()
    """(block reason, pods): each unplaceable pending pod under its most common reason."""
    signals_open: tuple[tuple[str, str, int], ...] = ()
    """(kind, severity, open signals)."""
    oom_storms_open: int = 0
    oom_storm_kills: int = 0
    """OOM kills in the open storms' windows, summed over the storms (a kill can count in a
    card's, a node's and a namespace's storm at once)."""
    idle_whole_gpus: int = 0
    """Healthy cards with nothing on them."""


@dataclass(frozen=True, slots=True)
class InstantReport:
    """The cluster view after one evaluated event-time instant: its fragmentation, and, when
    the pending queue was evaluated in it, every pending pod's explanation with its task, with
    any earlier explanation a scheduler verdict arriving in it completed (stored on that
    explanation's own instant, ``Explanation.evaluated_at``)."""

    at: datetime
    summary: ClusterFragmentation
    explanations: dict[str, tuple[Explanation, TaskProfile]] | None = None
    breakdown: ClusterBreakdown | None = None
    """The figures by pool, model, reason and kind (None: a report written before them)."""
