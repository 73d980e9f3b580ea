"""The three packing heuristics the FGD paper compares with: dot-product (Tetris's alignment),
GPU-clustering and GPU-packing, scored as the paper's simulator scored them.

Each is the only score plugin of its run there, with no normalisation, so the integer score
itself ranks the nodes; ties go to the lowest ``tie_rank``, and the cards inside the chosen
node are picked by the simulator's default ("best": the tightest card for a share). The
scores below keep the simulator's integer arithmetic (truncating division, the 0..100 range),
because the published curves depend on which nodes tie.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

from streams.fragmentation.shapes import MILLI_PER_GPU
from streams.placement.choice import (
    MAX_NODE_SCORE,
    Choice,
    ScoringArrays,
    best_scored,
    tightest_gpus,
)
from streams.placement.cluster_arrays import IntArray, gpu_tag
from streams.placement.spec import PodSpec

SPEC_CPU_MILLI = 128_000
"""The largest node the simulator normalises by (its ``MaxSpecCpu``): 128 cores."""
SPEC_GPU_MILLI = 8 * MILLI_PER_GPU
"""Its ``MaxSpecGpu``: eight cards, whatever the node has."""


class _Scored(ABC):
    """A policy that scores every candidate and takes the best, cards by the default choice."""

    name = ""

    def __init__(self, cluster: ScoringArrays) -> None:
        self.cluster = cluster

    @abstractmethod
    def scores(self, pod: PodSpec, candidates: IntArray) -> IntArray: ...

    def choose(self, pod: PodSpec, candidates: IntArray, rng: np.random.Generator) -> Choice:
        node = best_scored(self.cluster, candidates, self.scores(pod, candidates))
        return Choice(node, tightest_gpus(self.cluster.gpus_of(node), pod.shape))


class DotProductPolicy(_Scored):
    """Least aligned wins: the node's free (CPU, GPU) and the pod's request, each divided by
    the largest node's, have the smallest dot product (the paper's run merged a node's cards
    into one GPU figure and normalised by that largest node)."""

    name = "dot-product"

    def scores(self, pod: PodSpec, candidates: IntArray) -> IntArray:
        c = self.cluster
        shape = pod.shape
        cpu_free = c.cpu_free[candidates].astype(np.float64) / SPEC_CPU_MILLI
        gpu_free = c.gpu_free[candidates].sum(axis=1).astype(np.float64) / SPEC_GPU_MILLI
        dot = cpu_free * (shape.cpu_milli / SPEC_CPU_MILLI) + gpu_free * (
            shape.total_gpu_milli / SPEC_GPU_MILLI
        )
        score = 1.0 - dot / 2.0  # two dimensions: the mean product, the larger the lower
        out: IntArray = np.trunc(float(MAX_NODE_SCORE) * score).astype(np.int64)
        return out


class GpuClusteringPolicy(_Scored):
    """Like with like: a node already running only pods of the pod's GPU kind (a share, or
    the same number of whole cards) first, then one running that kind among others, then an
    empty one, then the rest; within each band, the fuller node. A pod without GPUs scores 0
    everywhere."""

    name = "gpu-clustering"

    def scores(self, pod: PodSpec, candidates: IntArray) -> IntArray:
        c = self.cluster
        tag = gpu_tag(pod.shape)
        if tag is None:
            return np.zeros(len(candidates), dtype=np.int64)
        band = MAX_NODE_SCORE // 4
        left = c.gpu_free[candidates].sum(axis=1)
        fullness = band * (SPEC_GPU_MILLI - left) // SPEC_GPU_MILLI
        kinds = c.tag_pods[candidates] > 0
        mine = kinds[:, tag]
        others = kinds.sum(axis=1) - mine
        offset = np.where(
            mine,
            np.where(others == 0, 3 * band, 2 * band),
            np.where(others == 0, band, 0),
        )
        out: IntArray = (fullness + offset).astype(np.int64)
        return out


class GpuPackingPolicy(_Scored):
    """Fill used cards before free ones and used nodes before free ones: a share that fits a
    used card scores 50-100 (the less room left on that card, the higher), a pod that needs
    free cards on a used node 33-50 (fewer cards, higher), and an empty node at most 33 (the
    fewer its cards, the higher). A pod without GPUs scores 0 everywhere."""

    name = "gpu-packing"

    def scores(self, pod: PodSpec, candidates: IntArray) -> IntArray:
        c = self.cluster
        shape = pod.shape
        if shape.total_gpu_milli <= 0:
            return np.zeros(len(candidates), dtype=np.int64)
        free = c.gpu_free[candidates]
        fully_free = (free == MILLI_PER_GPU).sum(axis=1)
        empty = fully_free == c.gpu_count[candidates]
        third, half = MAX_NODE_SCORE // 3, MAX_NODE_SCORE // 2
        on_empty = np.maximum(third - fully_free, fully_free)
        if shape.is_shared_gpu:
            # one card, the one with the least room that fits (padding past a node's cards
            # is 0 and never fits a share)
            room = np.where(free >= shape.gpu_milli, free, MILLI_PER_GPU + 1).min(axis=1)
            percent_left = room * 100 // MILLI_PER_GPU
            on_used = np.where(
                room == MILLI_PER_GPU,
                np.maximum(half - 1, third),
                np.maximum(MAX_NODE_SCORE - percent_left // 10, half),
            )
        else:  # whole cards: every card taken is a free one (a share of several cards, which
            # the simulator cannot take, is scored as whole cards)
            on_used = np.full(len(candidates), max(half - shape.gpu_count, third))
        out: IntArray = np.where(empty, on_empty, on_used).astype(np.int64)
        return out
