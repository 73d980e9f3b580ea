"""Turns trace records into the simulator's node and pod specs, and reads a trace for a what-if
run (`replay`, `experiment`) under its refusal policy."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import typer
from prometheus_client import CollectorRegistry

from connectors.refusals import RefusalLog
from connectors.trace.alibaba_csv import TraceNode, TracePod, read_nodes, read_pods
from models.refusal import Refusal
from streams.app.console.errors import EXIT_USAGE
from streams.app.lifecycle.settings_load import load_settings
from streams.fragmentation.shapes import PodShape
from streams.placement.spec import NodeSpec, PodSpec

RATIO_MAX = 10.0
"""Largest --ratio: the protocol pads the workload to ratio x GPU capacity, so 10^6 would
clone millions of pods before the first line printed; the FGD paper uses 1.3."""


def check_ratio(ratio: float) -> None:
    """Past RATIO_MAX is a usage error; NaN, infinity and <= 0 are the protocol's to refuse."""
    if math.isfinite(ratio) and ratio > RATIO_MAX:
        raise typer.BadParameter(
            f"{ratio:g} is above {RATIO_MAX:g} x GPU capacity (the FGD paper pads to 1.3)",
            param_hint="--ratio",
        )


def node_spec(node: TraceNode) -> NodeSpec:
    return NodeSpec(
        name=node.name,
        cpu_milli=node.cpu_milli,
        memory_mib=node.memory_mib,
        gpu_count=node.gpu_count,
        gpu_model=node.gpu_model,
    )


def pod_shape(pod: TracePod) -> PodShape:
    return PodShape(
        cpu_milli=pod.cpu_milli,
        gpu_milli=pod.gpu_milli,
        gpu_count=pod.num_gpu,
        gpu_models="|".join(pod.gpu_spec),
    )


def pod_spec(pod: TracePod) -> PodSpec:
    return PodSpec(name=pod.name, shape=pod_shape(pod), memory_mib=pod.memory_mib)


def load_nodes(path: Path) -> list[NodeSpec]:
    return [node_spec(n) for n in read_nodes(path, settings=load_settings().trace)]


def load_pods(path: Path) -> list[TracePod]:
    return read_pods(path, settings=load_settings().trace)


def specs(pods: Sequence[TracePod]) -> list[PodSpec]:
    return [pod_spec(p) for p in pods]


@dataclass(frozen=True, slots=True)
class Trace:
    """A trace as a what-if run uses it: the rows kept and the ones refused."""

    nodes: list[TraceNode]
    pods: list[TracePod]
    refused: list[Refusal]


def read_trace(
    nodes: Path,
    pods: Path,
    *,
    skip_bad_rows: bool,
    registry: CollectorRegistry | None = None,
) -> Trace:
    """Both lists with every bad row found; unless ``skip_bad_rows``, any refused row stops the
    command here, before the run, with one line per file and reason and exit status 2.

    A what-if run's figures (fragmentation, allocation) silently shift when rows are left out,
    so leaving them out is something the user asks for. ``registry`` gets the refusal counter
    (a replay serves it on its metrics port).
    """
    refused: list[Refusal] = []
    # no log lines of its own: the command prints every refusal, per reason with a count
    refusals = RefusalLog(
        registry=registry or CollectorRegistry(), sink=refused.append, log_every_s=None
    )
    settings = load_settings().trace
    node_rows = read_nodes(nodes, refusals=refusals, settings=settings)
    in_nodes = len(refused)
    pod_rows = read_pods(pods, refusals=refusals, settings=settings)
    if refused and not skip_bad_rows:
        lines = refusal_lines(refused[:in_nodes]) + refusal_lines(refused[in_nodes:])
        lines[-1] += "; nothing was run (--skip-bad-rows runs without them)"
        for line in lines:
            typer.echo(f"gpufrag: error: {line}", err=True)
        raise typer.Exit(EXIT_USAGE)
    return Trace(node_rows, pod_rows, refused)


def refusal_lines(refused: Sequence[Refusal]) -> list[str]:
    """One line per reason, in the order met, for the refusals of one file: how many rows, and
    the first one (its detail names the file, line and column)."""
    first: dict[str, Refusal] = {}
    counts: dict[str, int] = {}
    for r in refused:
        first.setdefault(r.reason, r)
        counts[r.reason] = counts.get(r.reason, 0) + 1
    lines = []
    for reason, r in first.items():
        n = counts[reason]
        rows = "1 row" if n == 1 else f"{n} rows"
        lines.append(f"{rows} refused ({reason}), first at {r.detail}")
    return lines
