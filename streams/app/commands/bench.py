"""`gpufrag bench`: does the cost of a placement change stay flat as the cluster grows?

Measured side by side in one run, as ratios, so the figure means the same on any machine: the
same stream of node changes is applied to the bundled cluster and to copies of it k times larger.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Annotated

import numpy as np
import typer
from rich.console import Console
from rich.table import Table

from connectors.trace.bundled import bundled_nodes_path, bundled_pods_path
from models import GpuState, NodeProfile
from streams.app.console.errors import user_errors
from streams.app.console.options import JsonOption
from streams.app.lifecycle.settings_load import load_settings
from streams.app.replaying.workload import load_nodes, load_pods, pod_shape
from streams.fragmentation.shapes import TypicalPods
from streams.pipeline import define_pipeline
from streams.placement.spec import NodeSpec
from streams.profiles.join import NodeProfileUpdate

AT = datetime(2023, 7, 1, tzinfo=UTC)


def _profile(spec: NodeSpec, name: str, cpu_used: int, gpu_used: list[int]) -> NodeProfile:
    return NodeProfile(
        name=name,
        gpu_model=spec.gpu_model,
        gpus=tuple(GpuState(index=i, milli_free=1000 - gpu_used[i]) for i in range(spec.gpu_count)),
        cpu_milli_allocatable=spec.cpu_milli,
        cpu_milli_requested=cpu_used,
        memory_mib_allocatable=spec.memory_mib,
        updated_at=AT,
    )


def _per_change_us(
    nodes: list[NodeSpec], copies: int, changes: int, seed: int, typical: TypicalPods
) -> float:
    analysis = define_pipeline(load_settings(), typical=typical).cluster()
    names = [(spec, f"{spec.name}-{c}") for c in range(copies) for spec in nodes]
    for spec, name in names:
        analysis.apply(NodeProfileUpdate(name, _profile(spec, name, 0, [0] * spec.gpu_count), AT))
    rng = np.random.default_rng(seed)
    # the changes hit the original nodes only, so every size sees the same states
    picks = rng.integers(0, len(nodes), size=changes)
    updates = []
    for i in picks.tolist():
        spec = nodes[i]
        used = [int(u) for u in rng.integers(0, 11, size=spec.gpu_count) * 100]
        cpu = int(rng.integers(0, spec.cpu_milli // 1000 + 1)) * 1000
        name = f"{spec.name}-0"
        updates.append(NodeProfileUpdate(name, _profile(spec, name, cpu, used), AT))
    # one warm pass fills the memo, so both sizes are timed on the same cache state
    for u in updates:
        analysis.apply(u)
    start = time.perf_counter()
    for u in updates:
        analysis.apply(u)
    return (time.perf_counter() - start) / len(updates) * 1e6


def bench(
    scale: Annotated[int, typer.Option(min=2, help="Size of the large cluster, in copies.")] = 8,
    changes: Annotated[int, typer.Option(min=100, help="Node changes timed per size.")] = 5000,
    as_json: JsonOption = False,
) -> None:
    """Time per node change in the fragmentation analysis at 1x and Nx the bundled cluster."""
    with user_errors():
        nodes = load_nodes(bundled_nodes_path())
        typical = TypicalPods.from_shapes(map(pod_shape, load_pods(bundled_pods_path())))
        small = _per_change_us(nodes, 1, changes, 7, typical)
        large = _per_change_us(nodes, scale, changes, 7, typical)
    result = {
        "nodes_small": len(nodes),
        "nodes_large": len(nodes) * scale,
        "us_per_change_small": round(small, 2),
        "us_per_change_large": round(large, 2),
        "ratio_large_to_small": round(large / small, 3),
    }
    if as_json:
        typer.echo(json.dumps(result))
        return
    table = Table(title="Fragmentation analysis: cost of one node change vs cluster size")
    for col in ("nodes", "µs per change", "ratio to smallest"):
        table.add_column(col, justify="right")
    table.add_row(str(len(nodes)), f"{small:.1f}", "1.00")
    table.add_row(str(len(nodes) * scale), f"{large:.1f}", f"{large / small:.2f}")
    Console().print(table)
