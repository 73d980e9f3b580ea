"""`gpufrag frag`: how fragmented an empty cluster is for a workload, before anything runs."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from connectors.trace.bundled import bundled_nodes_path, bundled_pods_path
from streams.app.console.errors import user_errors
from streams.app.console.options import JsonOption, NodesOption, PodsOption
from streams.app.replaying.workload import load_nodes, load_pods, pod_shape
from streams.fragmentation.measure import FragMeasure
from streams.fragmentation.shapes import DEFAULT_COVERAGE, TypicalPods
from streams.placement.cluster_arrays import SimCluster
from streams.placement.experiment import ProtocolError


def frag(
    pods: PodsOption = None,
    nodes: NodesOption = None,
    coverage: Annotated[
        float,
        typer.Option(help="Share of pods the typical shapes must cover (0-1]."),
    ] = DEFAULT_COVERAGE,
    as_json: JsonOption = False,
) -> None:
    """Fragmentation of the empty cluster for the workload in the pod list.

    Amount is the idle GPU the typical pods cannot use, in % of the cluster's GPUs; ratio is the
    same in % of idle GPU (equal on an empty cluster).
    """
    with user_errors():
        if not 0.0 < coverage <= 1.0:
            raise typer.BadParameter("must be in (0, 1]", param_hint="--coverage")
        node_specs = load_nodes(nodes or bundled_nodes_path())
        trace_pods = load_pods(pods or bundled_pods_path())
        if not trace_pods:
            raise ProtocolError("the pod list is empty: no workload to measure against")
        if not node_specs or not any(n.gpu_count for n in node_specs):
            raise ProtocolError("the node list has no GPUs: nothing can be fragmented")
        typical = TypicalPods.from_shapes((pod_shape(p) for p in trace_pods), coverage=coverage)
        cluster = SimCluster(node_specs, measure=FragMeasure(typical))
        amount = cluster.frag_milli / cluster.capacity_milli * 100.0
        ratio = cluster.frag_milli / cluster.idle_milli * 100.0
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "frag_amount_pct": amount,
                    "frag_ratio_pct": ratio,
                    "typical_pods": len(typical),
                    "nodes": len(cluster),
                    "gpus": cluster.capacity_milli // 1000,
                }
            )
        )
        return
    table = Table(title="Empty-cluster fragmentation (FGD measure)")
    table.add_column("nodes", justify="right")
    table.add_column("GPUs", justify="right")
    table.add_column("typical pod shapes", justify="right")
    table.add_column("frag amount (% GPUs)", justify="right")
    table.add_column("frag ratio (% idle)", justify="right")
    table.add_row(
        str(len(cluster)),
        str(cluster.capacity_milli // 1000),
        str(len(typical)),
        f"{amount:.2f}",
        f"{ratio:.2f}",
    )
    Console().print(table)
