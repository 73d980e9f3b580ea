"""What the cluster analysis reports: pending-pod explanations and the cluster's fragmentation.

They are the core's outputs that the history store keeps as rows, so they live here, below both
the core that makes them and the connectors that store them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from models.profiles import TaskProfile

__all__ = ["BlockReason", "ClusterFragmentation", "Explanation", "InstantReport", "NearMiss"]


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


@dataclass(frozen=True, slots=True)
class NearMiss:
    node: str
    reasons: tuple[BlockReason, ...]
    missing_cpu_milli: int
    missing_memory_mib: int
    missing_gpus: int  # cards with room the node lacks


@dataclass(frozen=True, slots=True)
class Explanation:
    """A pending request checked against the whole cluster."""

    fits_cluster_total: bool  # the free totals would cover it
    fits_some_node: bool
    blocking: tuple[tuple[BlockReason, int], ...]  # (reason, nodes), most common first
    near_misses: tuple[NearMiss, ...]
    nodes_checked: int

    @property
    def unplaceable(self) -> bool:
        """The fragmentation case: enough free in total, no node that can take it."""
        return self.fits_cluster_total and not self.fits_some_node

    def evidence(self) -> dict[str, object]:
        return {
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

    @property
    def alloc_pct(self) -> float:
        """GPU allocated, in % of the cluster's GPUs (unhealthy cards count as allocated)."""
        cap = self.capacity_gpus
        return (cap - self.idle_gpus) / cap * 100.0 if cap else 0.0


@dataclass(frozen=True, slots=True)
class InstantReport:
    """The cluster view after one evaluated event-time instant: its fragmentation, and, when
    the pending queue was evaluated in it, every pending pod's explanation with its task."""

    at: datetime
    summary: ClusterFragmentation
    explanations: dict[str, tuple[Explanation, TaskProfile]] | None = None
