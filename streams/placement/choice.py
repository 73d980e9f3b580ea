"""What every placement policy shares: the choice it returns, its one-method interface, and how
cards inside the chosen node are handed out when the policy leaves that to the device plugin.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from streams.fragmentation.shapes import MILLI_PER_GPU, PodShape
from streams.placement.cluster_arrays import IntArray, SimCluster
from streams.placement.spec import PodSpec

MAX_NODE_SCORE = 100
"""kube-scheduler's score range is 0..100 (``framework.MaxNodeScore``)."""


@dataclass(frozen=True, slots=True)
class Choice:
    node: int
    gpu_ids: tuple[int, ...]


class PlacementPolicy(Protocol):
    """One extension point: choose among feasible nodes (``candidates`` is never empty)."""

    name: str

    def choose(self, pod: PodSpec, candidates: IntArray, rng: np.random.Generator) -> Choice: ...


def exclusive_gpus(free: IntArray, count: int) -> tuple[int, ...]:
    """Whole cards go to the lowest-indexed fully free GPUs, as the device plugin hands them out."""
    ids = tuple(int(g) for g in np.flatnonzero(free == MILLI_PER_GPU)[:count])
    if len(ids) != count:
        raise ValueError(f"node has {len(ids)} free GPUs, {count} needed")
    return ids


def tightest_gpus(free: IntArray, shape: PodShape) -> tuple[int, ...]:
    """The simulator's default card choice ("best"): a share goes to the card with the least
    room that fits it, a fully free card included, lowest index first; whole cards as the
    device plugin hands them out."""
    if shape.is_shared_gpu:
        room = np.where(free >= shape.gpu_milli, free, MILLI_PER_GPU + 1)
        return (int(np.argmin(room)),)
    return exclusive_gpus(free, shape.gpu_count)


def best_scored(cluster: SimCluster, candidates: IntArray, scores: IntArray) -> int:
    """The best-scored candidate. The simulator breaks equal scores by node name, names it
    prefixed with a per-seed permutation: the lowest ``tie_rank`` here."""
    best = candidates[scores == scores.max()]
    return int(best[int(np.argmin(cluster.tie_rank[best]))])
