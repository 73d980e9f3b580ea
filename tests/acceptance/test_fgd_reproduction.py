"""gpufrag's FGD measure and protocol against the published results of the paper's simulator."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from connectors.trace.alibaba_csv import read_pods
from connectors.trace.published import read_published
from streams.app.replaying.workload import load_nodes, pod_shape, specs
from streams.fragmentation.measure import FragMeasure
from streams.fragmentation.shapes import TypicalPods
from streams.placement.cluster_arrays import SimCluster
from streams.placement.experiment import run_experiment
from streams.placement.policies import POLICIES

WORKLOADS = ("default", "gpushare40", "multigpu20", "cpu050")
SEEDS = tuple(range(42, 52))
TOLERANCE_PP = 0.5
"""Allowed gap of the 10-seed mean, in percentage points, at every published level (0..130 %
of GPU capacity arrived), as issue 28 asks. The largest measured gaps: 0.49 (gpu-clustering on
multigpu20, a one-sided gap whose cause is not found, docs/fidelity.md) and 0.44 (random on
multigpu20: its random stream is numpy's, not Go's). The ratio of fragmentation to idle GPU is
not held to it: at high levels the idle share is small and the published seeds themselves
spread by 7 points."""


def _assert_published_means(
    trace_dir: Path, published_dir: Path, *, workload: str, policy: str
) -> None:
    nodes = load_nodes(trace_dir / "openb_node_list_gpu_node.csv")
    pods = read_pods(trace_dir / f"openb_pod_list_{workload}.csv")
    typical = TypicalPods.from_shapes(map(pod_shape, pods))
    ours = run_experiment(nodes, specs(pods), policy=policy, seeds=SEEDS, typical=typical)
    theirs = read_published(
        published_dir, workload=f"openb_pod_list_{workload}", policy=policy, seeds=set(SEEDS)
    )
    assert theirs.seeds == SEEDS
    for metric in ("alloc_pct", "frag_amount_pct"):
        gaps = np.abs(np.array(getattr(ours, metric)) - np.array(getattr(theirs, metric)))
        worst = int(np.nanargmax(gaps))
        assert gaps[worst] <= TOLERANCE_PP, (
            f"{policy} on {workload}: {metric} {getattr(ours, metric)[worst]:.2f} at level "
            f"{worst}, published {getattr(theirs, metric)[worst]:.2f}"
        )


def published_level0_ratio(published_dir: Path, workload: str) -> float:
    with (published_dir / "analysis_frag_ratio_discrete.csv").open() as fh:
        for row in csv.DictReader(fh):
            if (
                row["workload"] == f"openb_pod_list_{workload}"
                and row["sc_policy"] == "06-FGD"
                and row["seed"] == "42"
            ):
                return float(row["0"])
    raise AssertionError(f"no published row for {workload}")


@pytest.mark.parametrize("workload", WORKLOADS)
def test_empty_cluster_frag_ratio_matches_published(
    trace_dir: Path, published_dir: Path, workload: str
) -> None:
    nodes = load_nodes(trace_dir / "openb_node_list_gpu_node.csv")
    pods = read_pods(trace_dir / f"openb_pod_list_{workload}.csv")
    cluster = SimCluster(nodes, measure=FragMeasure(TypicalPods.from_shapes(map(pod_shape, pods))))
    ours = cluster.frag_milli / cluster.idle_milli * 100.0
    assert ours == pytest.approx(published_level0_ratio(published_dir, workload), abs=0.1)


@pytest.mark.slow
@pytest.mark.parametrize("policy", list(POLICIES))
@pytest.mark.parametrize("workload", WORKLOADS)
def test_each_policy_matches_the_published_means(
    trace_dir: Path, published_dir: Path, workload: str, policy: str
) -> None:
    _assert_published_means(trace_dir, published_dir, workload=workload, policy=policy)
