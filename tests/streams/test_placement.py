"""Policies and the simulated scheduling cycle on small clusters worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from streams.fragmentation.shapes import PodShape
from streams.placement.cluster_arrays import PlacementError
from streams.placement.experiment import arrival_sequence, level_means
from streams.placement.policies import make_policy
from streams.placement.sim_scheduler import Placement, SimScheduler, Unschedulable
from streams.placement.spec import NodeSpec
from tests.streams.placement_cases import HALF, WHOLE, cluster, pod


def test_fgd_packs_shared_pods_onto_a_started_card() -> None:
    # n0 has a half-used card; putting the next half there leaves whole cards intact elsewhere.
    c = cluster(NodeSpec("n0", 8000, 8192, 2, "T4"), NodeSpec("n1", 8000, 8192, 2, "T4"))
    sched = SimScheduler(c, make_policy("fgd", c), np.random.default_rng(0))
    first = sched.schedule(pod("a", HALF))
    assert isinstance(first, Placement)
    second = sched.schedule(pod("b", HALF))
    assert isinstance(second, Placement)
    assert (second.node, second.gpu_ids) == (first.node, first.gpu_ids)
    assert c.frag_milli == pytest.approx(c.recompute_frag_milli())
    assert c.frag_milli == 0.0


def test_best_fit_prefers_the_fuller_node_and_the_tightest_card() -> None:
    c = cluster(NodeSpec("big", 64000, 65536, 4, "T4"), NodeSpec("small", 8000, 8192, 2, "T4"))
    c.bind(1, pod("x", HALF), (1,))
    sched = SimScheduler(c, make_policy("best-fit", c), np.random.default_rng(0))
    placed = sched.schedule(pod("y", PodShape(1000, 300, 1)))
    assert isinstance(placed, Placement)
    assert (placed.node, placed.gpu_ids) == ("small", (1,))


def test_ties_go_to_the_lowest_tie_rank() -> None:
    nodes = [NodeSpec(f"n{i}", 8000, 8192, 1, "T4") for i in range(3)]
    c = cluster(*nodes, tie_rank=[2, 0, 1])
    placed = SimScheduler(c, make_policy("best-fit", c), np.random.default_rng(0)).schedule(
        pod("a", WHOLE)
    )
    assert isinstance(placed, Placement) and placed.node == "n1"


def test_unschedulable_counts_the_first_failing_filter_per_node() -> None:
    c = cluster(
        NodeSpec("cpu-poor", 500, 65536, 2, "T4"),
        NodeSpec("mem-poor", 8000, 512, 2, "T4"),
        NodeSpec("gpu-busy", 8000, 65536, 1, "T4"),
        NodeSpec("wrong-model", 8000, 65536, 2, "P100"),
    )
    c.bind(2, pod("hog", WHOLE), (0,))
    want = pod("w", PodShape(1000, 1000, 1, gpu_models="T4"), memory_mib=1024)
    result = SimScheduler(c, make_policy("fgd", c), np.random.default_rng(0)).schedule(want)
    assert isinstance(result, Unschedulable)
    assert dict(result.reasons) == {
        "Insufficient cpu": 1,
        "Insufficient memory": 1,
        "Insufficient nvidia.com/gpu": 1,
        "node(s) didn't match Pod's node affinity/selector": 1,
    }
    assert result.message.startswith(
        "0/4 nodes are available: 1 Insufficient cpu, 1 Insufficient memory, "
        "1 Insufficient nvidia.com/gpu, 1 node(s) didn't match Pod's node affinity/selector."
    )


def test_bind_refuses_overcommit_and_unbind_of_unknown_pod() -> None:
    c = cluster(NodeSpec("n0", 2000, 4096, 1, "T4"))
    c.bind(0, pod("a", HALF), (0,))
    with pytest.raises(PlacementError):
        c.bind(0, pod("b", WHOLE), (0,))
    with pytest.raises(PlacementError):
        c.unbind(0, pod("c", WHOLE), (0,))
    c.unbind(0, pod("a", HALF), (0,))
    assert c.allocated_milli == 0 and c.frag_milli == pytest.approx(c.recompute_frag_milli())


def test_release_returns_resources() -> None:
    c = cluster(NodeSpec("n0", 8000, 8192, 2, "T4"))
    sched = SimScheduler(c, make_policy("random", c), np.random.default_rng(1))
    assert isinstance(sched.schedule(pod("a", WHOLE)), Placement)
    assert sched.release("a") is not None
    assert sched.release("a") is None
    assert c.allocated_milli == 0 and int(c.cpu_free[0]) == 8000


def test_unknown_policy_is_named() -> None:
    c = cluster(NodeSpec("n0", 8000, 8192, 2, "T4"))
    with pytest.raises(ValueError, match="unknown placement policy 'tetris'; known: best-fit"):
        make_policy("tetris", c)


def test_arrival_sequence_pads_to_ratio_and_keeps_every_original_pod() -> None:
    pods = [pod(f"p{i}", WHOLE) for i in range(10)]
    seq = arrival_sequence(pods, capacity_milli=10_000, ratio=1.3, rng=np.random.default_rng(3))
    assert {p.name for p in pods} <= {p.name for p in seq}
    assert sum(p.total_gpu_milli for p in seq) == 13_000
    trimmed = arrival_sequence(pods, capacity_milli=5_000, ratio=1.0, rng=np.random.default_rng(3))
    assert sum(p.total_gpu_milli for p in trimmed) == 5_000


def test_level_means_round_half_to_even_and_fall_back_to_neighbours() -> None:
    arrived = np.array([0.4, 0.5, 1.5, 2.4, 5.0])
    values = np.array([1.0, 3.0, 5.0, 7.0, 9.0])
    means = level_means(arrived, values, levels=[0, 1, 2, 3, 4])
    assert means[0] == 2.0  # 0.4 and 0.5 round to 0
    assert means[2] == 6.0  # 1.5 and 2.4 round to 2
    assert means[1] == 4.0  # nothing rounds to 1: levels 0 and 2 stand in
    assert means[3] == 6.0
    assert means[4] == 9.0
