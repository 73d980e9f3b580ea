"""The paper's three packing heuristics on small clusters, each score worked out by hand from the
simulator's definitions (integer arithmetic, the 0..100 range)."""

from __future__ import annotations

import numpy as np
import pytest

from streams.app.console.options import POLICY_NAMES
from streams.fragmentation.shapes import PodShape
from streams.placement.cluster_arrays import SimCluster
from streams.placement.heuristics import DotProductPolicy, GpuClusteringPolicy, GpuPackingPolicy
from streams.placement.policies import POLICIES, make_policy
from streams.placement.sim_scheduler import Placement, SimScheduler
from streams.placement.spec import NodeSpec
from tests.streams.placement_cases import HALF, WHOLE, cluster, pod

CPU_ONLY = PodShape(cpu_milli=1000, gpu_milli=0, gpu_count=0)
TWO_WHOLE = PodShape(cpu_milli=1000, gpu_milli=1000, gpu_count=2)
SHARE_400 = PodShape(cpu_milli=1000, gpu_milli=400, gpu_count=1)
SHARE_700 = PodShape(cpu_milli=1000, gpu_milli=700, gpu_count=1)


def _scored(c: SimCluster, name: str, shape: PodShape) -> list[int]:
    policy = make_policy(name, c)
    assert isinstance(policy, DotProductPolicy | GpuClusteringPolicy | GpuPackingPolicy)
    return [int(s) for s in policy.scores(pod("p", shape), np.arange(len(c)))]


def _built(gpus: tuple[int, ...], binds: list[tuple[int, PodShape, tuple[int, ...]]]) -> SimCluster:
    c = cluster(*(NodeSpec(f"n{i}", 32000, 65536, g, "T4") for i, g in enumerate(gpus)))
    for k, (node, shape, cards) in enumerate(binds):
        c.bind(node, pod(f"b{k}", shape), cards)
    return c


def _packing_cluster() -> SimCluster:
    # empty, 600 left on a card, 300 left on a card, empty with eight cards
    return _built((2, 2, 2, 8), [(1, SHARE_400, (0,)), (2, SHARE_700, (0,))])


@pytest.mark.parametrize(
    ("shape", "want"),
    [
        # empty nodes: max(33 - free cards, free cards); a share that fits a used card:
        # max(100 - (left * 100 // 1000) // 10, 50); one that needs a free card: max(50 - 1, 33)
        (HALF, [31, 94, 49, 25]),
        # whole cards are free cards on a used node: max(50 - count, 33)
        (WHOLE, [31, 49, 49, 25]),
        (TWO_WHOLE, [31, 0, 0, 25]),  # only the empty nodes have two free cards (not scored)
        (CPU_ONLY, [0, 0, 0, 0]),
    ],
)
def test_gpu_packing_scores(shape: PodShape, want: list[int]) -> None:
    c = _packing_cluster()
    got = _scored(c, "gpu-packing", shape)
    fits = c.feasible(pod("p", shape))
    assert [g for g, ok in zip(got, fits, strict=True) if ok] == [
        w for w, ok in zip(want, fits, strict=True) if ok
    ]


def _clustering_cluster() -> SimCluster:
    # empty; one share; a share and a whole card; two whole cards
    return _built(
        (2, 8, 4, 4),
        [(1, HALF, (0,)), (2, HALF, (0,)), (2, WHOLE, (1,)), (3, TWO_WHOLE, (0, 1))],
    )


@pytest.mark.parametrize(
    ("shape", "want"),
    [
        # 25 * (8000 - GPU milli left) // 8000, plus 75 (only the pod's kind there), 50 (its
        # kind among others), 25 (no GPU pod) or 0 (other kinds only)
        # (GPU milli left: 2000, 7500, 2500, 2000)
        (HALF, [18 + 25, 1 + 75, 17 + 50, 18 + 0]),
        (WHOLE, [18 + 25, 1 + 0, 17 + 50, 18 + 0]),
        (TWO_WHOLE, [18 + 25, 1 + 0, 17 + 0, 18 + 75]),
        (CPU_ONLY, [0, 0, 0, 0]),
    ],
)
def test_gpu_clustering_scores(shape: PodShape, want: list[int]) -> None:
    assert _scored(_clustering_cluster(), "gpu-clustering", shape) == want


def test_gpu_clustering_forgets_a_released_pod() -> None:
    c = _clustering_cluster()
    c.unbind(2, pod("b2", WHOLE), (1,))  # the third node now runs one share only
    assert _scored(c, "gpu-clustering", HALF)[2] == 25 * (8000 - 3500) // 8000 + 75
    c.unbind(2, pod("b1", HALF), (0,))  # and now no GPU pod at all
    assert _scored(c, "gpu-clustering", HALF)[2] == 25 * (8000 - 4000) // 8000 + 25


def test_dot_product_prefers_the_least_aligned_node() -> None:
    c = cluster(NodeSpec("roomy", 64000, 65536, 2, "T4"), NodeSpec("tight", 8000, 65536, 1, "T4"))
    c.bind(1, pod("x", SHARE_400), (0,))
    want = PodShape(cpu_milli=4000, gpu_milli=500, gpu_count=1)
    # roomy: (64000/128000 * 4000/128000 + 2000/8000 * 500/8000) / 2 = 0.015625 -> 98.4 -> 98
    # tight: (7000/128000 * 4000/128000 + 600/8000 * 500/8000) / 2 = 0.00332 -> 99.7 -> 99
    assert _scored(c, "dot-product", want) == [98, 99]
    placed = SimScheduler(c, make_policy("dot-product", c), np.random.default_rng(0)).schedule(
        pod("p", want)
    )
    assert isinstance(placed, Placement) and (placed.node, placed.gpu_ids) == ("tight", (0,))


@pytest.mark.parametrize("name", ["dot-product", "gpu-clustering", "gpu-packing"])
def test_a_share_goes_to_the_tightest_card_that_fits(name: str) -> None:
    c = cluster(NodeSpec("n", 32000, 65536, 4, "T4"))
    c.bind(0, pod("a", SHARE_400), (1,))  # 600 left on card 1
    c.bind(0, pod("b", SHARE_700), (2,))  # 300 left on card 2
    placed = SimScheduler(c, make_policy(name, c), np.random.default_rng(0)).schedule(
        pod("p", HALF)
    )
    assert isinstance(placed, Placement) and placed.gpu_ids == (1,)


def test_equal_scores_go_to_the_lowest_tie_rank() -> None:
    nodes = [NodeSpec(f"n{i}", 8000, 8192, 2, "T4") for i in range(3)]
    for name in ("dot-product", "gpu-clustering", "gpu-packing"):
        c = cluster(*nodes, tie_rank=[1, 2, 0])
        placed = SimScheduler(c, make_policy(name, c), np.random.default_rng(0)).schedule(
            pod("a", HALF)
        )
        assert isinstance(placed, Placement) and placed.node == "n2", name


def test_help_texts_name_every_policy() -> None:
    assert ", ".join(POLICIES) == POLICY_NAMES
