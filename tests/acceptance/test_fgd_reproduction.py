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

WORKLOADS = ("default", "gpushare40", "multigpu20", "cpu050")
SEEDS = tuple(range(42, 52))


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
@pytest.mark.parametrize("policy", ["random", "best-fit", "fgd"])
def test_fgd_protocol_matches_published_means(
    trace_dir: Path, published_dir: Path, policy: str
) -> None:
    nodes = load_nodes(trace_dir / "openb_node_list_gpu_node.csv")
    pods = read_pods(trace_dir / "openb_pod_list_default.csv")
    typical = TypicalPods.from_shapes(map(pod_shape, pods))
    ours = run_experiment(nodes, specs(pods), policy=policy, seeds=SEEDS, typical=typical)
    theirs = read_published(
        published_dir, workload="openb_pod_list_default", policy=policy, seeds=set(SEEDS)
    )
    assert theirs.seeds == SEEDS
    assert ours.alloc_pct[130] == pytest.approx(theirs.alloc_pct[130], abs=1.0)
    for level in (50, 80, 100, 130):
        assert ours.frag_amount_pct[level] == pytest.approx(
            theirs.frag_amount_pct[level], abs=1.0
        ), f"frag amount at {level} %"
    # the whole curves stay close too, not only the points the acceptance names
    assert np.nanmax(np.abs(np.array(ours.frag_amount_pct) - theirs.frag_amount_pct)) < 1.0
