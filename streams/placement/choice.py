"""What every placement policy shares: the choice it returns, its one-method interface, and how
cards inside the chosen node are handed out when the policy leaves that to the device plugin.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from streams.fragmentation.shapes import MILLI_PER_GPU, PodShape
from streams.placement.cluster_arrays import IntArray
from streams.placement.spec import PodSpec

MAX_NODE_SCORE = 100
"""kube-scheduler's score range is 0..100 (``framework.MaxNodeScore``)."""


@dataclass(frozen=True, slots=True)
class Choice:
    node: int
    gpu_ids: tuple[int, ...]


class ScoringArrays(Protocol):
    """What the score-only policies read of a cluster: the simulator's ``SimCluster``, or the
    extender's live view of free capacity (``streams.extender.scores``)."""

    cpu_free: IntArray
    gpu_free: IntArray
    """Free milli-GPU per card, one row per node (0 past a node's cards)."""
    gpu_count: IntArray
    tie_rank: IntArray

    @property
    def tag_pods(self) -> IntArray:
        """Pods bound per node by GPU kind (``cluster_arrays.gpu_tag``)."""
        ...

    def gpus_of(self, i: int) -> IntArray: ...


class ScoresNodes(Protocol):
    """A policy whose choice is the best of its integer node scores (all but random and fgd,
    which the extender scores its own way)."""

    name: str

    def scores(self, pod: PodSpec, candidates: IntArray) -> IntArray: ...


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


def best_scored(cluster: ScoringArrays, candidates: IntArray, scores: IntArray) -> int:
    """The best-scored candidate. The simulator breaks equal scores by node name, names it
    prefixed with a per-seed permutation: the lowest ``tie_rank`` here."""
    best = candidates[scores == scores.max()]
    return int(best[int(np.argmin(cluster.tie_rank[best]))])
