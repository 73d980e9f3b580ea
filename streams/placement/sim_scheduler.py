"""The simulated scheduling cycle: filter, then let the policy score; explain failures.

A pod that fits no node gets the per-node reasons counted the way kube-scheduler counts them
(the first failing filter plugin decides a node's reason; the resource filter lists every
insufficient resource), and the message has kube-scheduler's FailedScheduling format.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from streams.placement.choice import Choice, PlacementPolicy
from streams.placement.cluster_arrays import SimCluster
from streams.placement.spec import PodSpec

REASON_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
REASON_CPU = "Insufficient cpu"
REASON_MEMORY = "Insufficient memory"
REASON_GPU = "Insufficient nvidia.com/gpu"


@dataclass(frozen=True, slots=True)
class Placement:
    pod: PodSpec
    node: str
    gpu_ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Unschedulable:
    pod: PodSpec
    reasons: tuple[tuple[str, int], ...]  # (reason, number of nodes), sorted by reason
    message: str


def failed_scheduling_message(total_nodes: int, reasons: Counter[str]) -> str:
    """kube-scheduler's FitError text, with the preemption post-filter's verdict appended."""
    parts = sorted(f"{n} {reason}" for reason, n in reasons.items())
    head = f"0/{total_nodes} nodes are available: {', '.join(parts)}."
    return (
        f"{head} preemption: 0/{total_nodes} nodes are available: "
        f"{total_nodes} No preemption victims found for incoming pod."
    )


def filter_reasons(cluster: SimCluster, pod: PodSpec) -> Counter[str]:
    shape = pod.shape
    reasons: Counter[str] = Counter()
    if shape.gpu_count > 0:
        affinity_fail = ~cluster.model_mask(shape.gpu_models)
    else:
        affinity_fail = np.zeros(len(cluster), dtype=bool)
    reasons[REASON_AFFINITY] = int(affinity_fail.sum())
    considered = ~affinity_fail
    reasons[REASON_CPU] = int((considered & (cluster.cpu_free < shape.cpu_milli)).sum())
    reasons[REASON_MEMORY] = int((considered & (cluster.mem_free < pod.memory_mib)).sum())
    if shape.gpu_count > 0:
        fitting = cluster.gpus_fit(shape.gpu_milli, shape.gpu_count)
        reasons[REASON_GPU] = int((considered & ~fitting).sum())
    return Counter({r: n for r, n in reasons.items() if n})


class SimScheduler:
    """Binds pods through a policy and keeps track of where each one went."""

    def __init__(
        self, cluster: SimCluster, policy: PlacementPolicy, rng: np.random.Generator
    ) -> None:
        self.cluster = cluster
        self.policy = policy
        self.rng = rng
        self.bound: dict[str, tuple[PodSpec, Choice]] = {}

    def schedule(self, pod: PodSpec) -> Placement | Unschedulable:
        if pod.name in self.bound:
            raise ValueError(f"pod {pod.name} is already bound")
        candidates = np.flatnonzero(self.cluster.feasible(pod))
        if len(candidates) == 0:
            reasons = filter_reasons(self.cluster, pod)
            return Unschedulable(
                pod=pod,
                reasons=tuple(sorted(reasons.items())),
                message=failed_scheduling_message(len(self.cluster), reasons),
            )
        choice = self.policy.choose(pod, candidates, self.rng)
        self.cluster.bind(choice.node, pod, choice.gpu_ids)
        self.bound[pod.name] = (pod, choice)
        return Placement(pod=pod, node=self.cluster.names[choice.node], gpu_ids=choice.gpu_ids)

    def release(self, pod_name: str) -> Placement | None:
        """Free a bound pod's resources; None when it was never bound (it stayed pending)."""
        entry = self.bound.pop(pod_name, None)
        if entry is None:
            return None
        pod, choice = entry
        self.cluster.unbind(choice.node, pod, choice.gpu_ids)
        return Placement(pod=pod, node=self.cluster.names[choice.node], gpu_ids=choice.gpu_ids)
