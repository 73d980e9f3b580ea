"""`experiment`: the FGD paper's protocol, seconds per policy and seed, in this process; the
baseline is reading the trace it places."""

from __future__ import annotations

import time
from pathlib import Path

from connectors.trace.bundled import bundled_nodes_path, bundled_pods_path
from streams.app.bench.figures import Figure, Goal
from streams.app.bench.process_cases import TRACE_SEED, trace_nodes
from streams.app.bench.runner import Context, measure
from streams.app.replaying.workload import node_spec, pod_shape, read_trace, specs
from streams.fragmentation.shapes import TypicalPods
from streams.placement.experiment import run_seed
from streams.placement.spec import NodeSpec, PodSpec

POLICIES = ("random", "best-fit", "fgd")


def _load(nodes: Path) -> tuple[list[NodeSpec], list[PodSpec], TypicalPods]:
    """What `gpufrag experiment` reads before its first seed."""
    trace = read_trace(nodes, bundled_pods_path(), skip_bad_rows=False)
    typical = TypicalPods.from_shapes(map(pod_shape, trace.pods))
    return [node_spec(n) for n in trace.nodes], specs(trace.pods), typical


def experiment(ctx: Context) -> list[Figure]:
    nodes_arg = trace_nodes(ctx)
    nodes_path = (
        bundled_nodes_path() if not nodes_arg else ctx.workdir / nodes_arg[1].rsplit("/", 1)[-1]
    )

    def load_s() -> float:
        start = time.perf_counter()
        _load(nodes_path)
        return time.perf_counter() - start

    loading = measure(ctx, "experiment: loading the trace", load_s)
    node_specs, pod_specs, typical = _load(nodes_path)
    figures = []
    for policy in POLICIES:

        def one_seed(policy: str = policy) -> float:
            start = time.perf_counter()
            run_seed(node_specs, pod_specs, policy=policy, seed=TRACE_SEED, typical=typical)
            return time.perf_counter() - start

        seconds = measure(ctx, f"experiment: {policy}", one_seed)
        figures.append(
            Figure(
                case="experiment",
                name=f"{policy}_s",
                unit="s",
                samples=seconds,
                baseline="loading the trace",
                baseline_samples=loading,
                targets=(Goal(1.0),),
                params={
                    "policy": policy,
                    "seed": TRACE_SEED,
                    "nodes": len(node_specs),
                    "pods": len(pod_specs),
                },
            )
        )
    return figures
