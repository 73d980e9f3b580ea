"""`gpufrag experiment`: the FGD paper's protocol for one policy over several seeds."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from connectors.trace.bundled import bundled_nodes_path, bundled_pods_path
from connectors.trace.published import PublishedCurve, PublishedResultsError, read_published
from streams.app.commands.experiment_seeds import default_workers, seed_curves
from streams.app.console.errors import user_errors
from streams.app.console.options import JsonOption, NodesOption, PodsOption
from streams.app.lifecycle.settings_load import load_settings
from streams.app.replaying.workload import check_ratio, node_spec, pod_shape, read_trace, specs
from streams.fragmentation.shapes import TypicalPods
from streams.placement.experiment import (
    DEFAULT_RATIO,
    LEVELS,
    Curve,
    check_protocol_inputs,
)
from streams.placement.policies import POLICIES

MAX_SEEDS = 1000
SEED_PART = re.compile(r"^(\d+)(?:-(\d+))?$")


def parse_seeds(text: str) -> list[int]:
    """'42-51', '42,43,50' or '42': non-negative, at most MAX_SEEDS of them."""
    seeds: list[int] = []
    for part in text.split(","):
        m = SEED_PART.match(part.strip())
        if m is None:
            raise typer.BadParameter(
                f"{text!r} is not a seed list like 42-51 or 42,43 (seeds are >= 0)",
                param_hint="--seeds",
            )
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) is not None else lo
        if hi < lo:
            raise typer.BadParameter(
                f"range {part.strip()!r} ends before it starts", param_hint="--seeds"
            )
        if len(seeds) + hi - lo + 1 > MAX_SEEDS:
            raise typer.BadParameter(f"at most {MAX_SEEDS} seeds", param_hint="--seeds")
        seeds.extend(range(lo, hi + 1))
    if len(set(seeds)) != len(seeds):
        raise typer.BadParameter("a seed is listed twice", param_hint="--seeds")
    return seeds


def _clean(values: Sequence[float]) -> list[float | None]:
    return [None if math.isnan(v) else round(v, 4) for v in values]


def _cell(value: float, *, signed: bool = False) -> str:
    if math.isnan(value):
        return "-"
    value = round(value, 2) + 0.0  # no "-0.00"
    return f"{value:+.2f}" if signed else f"{value:.2f}"


def _render(curve: Curve, published: PublishedCurve | None, every: int, *, refused: int) -> None:
    title = "FGD protocol: means over seeds by arrived GPU demand (% of cluster GPUs)"
    table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("arrived", justify="right", min_width=7)
    for label in ("alloc", "frag", "ratio"):
        table.add_column(label, justify="right")
        if published is not None:
            table.add_column("pub", justify="right")
            table.add_column("diff", justify="right")
    for i, level in enumerate(curve.levels):
        if level % every and level != curve.levels[-1]:
            continue
        row = [str(level)]
        for ours, theirs in (
            (curve.alloc_pct, published.alloc_pct if published else None),
            (curve.frag_amount_pct, published.frag_amount_pct if published else None),
            (curve.frag_ratio_pct, published.frag_ratio_pct if published else None),
        ):
            row.append(_cell(ours[i]))
            if theirs is not None:
                row += [_cell(theirs[i]), _cell(ours[i] - theirs[i], signed=True)]
        table.add_row(*row)
    console = Console()
    console.print(table)
    console.print(
        "alloc: GPU allocated; frag: fragmentation amount (idle GPU the typical pods cannot "
        "use); ratio: fragment in % of idle GPU; pub: the published mean."
    )
    console.print(
        f"pods arrived per seed {curve.pods_arrived:.0f}, placed {curve.pods_placed:.0f}, "
        f"dropped (fit no node) {curve.pods_arrived - curve.pods_placed:.0f}"
    )
    if refused:
        console.print(f"trace rows refused and left out (--skip-bad-rows): {refused}")


def experiment(
    policy: Annotated[
        str, typer.Option("--policy", help=f"Placement policy: {', '.join(sorted(POLICIES))}.")
    ],
    pods: PodsOption = None,
    nodes: NodesOption = None,
    seeds: Annotated[
        str, typer.Option("--seeds", help="Seeds, as a range 42-51 or a list 42,43.")
    ] = "42-51",
    ratio: Annotated[
        float,
        typer.Option(help="Pad the workload to this multiple of cluster GPU capacity (up to 10)."),
    ] = DEFAULT_RATIO,
    published: Annotated[
        Path | None,
        typer.Option(
            "--published",
            help="Directory of the simulator's published result CSVs, printed beside ours.",
        ),
    ] = None,
    every: Annotated[
        int, typer.Option(min=1, help="Print every Nth level in the table (JSON has all).")
    ] = 5,
    skip_bad_rows: Annotated[
        bool,
        typer.Option(
            help="Run without the trace rows that fail a check (their count is printed); "
            "without it any such row stops the experiment before it starts."
        ),
    ] = False,
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers",
            min=1,
            help="Seeds run at once, one process each; default: the cores this process may "
            "use. The result is the same for any count.",
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Run the paper's protocol: shuffle, pad to 1.3x capacity, arrivals only, no departures.

    For each arrived-demand level 0..130 % prints the mean over seeds of GPU allocation,
    fragmentation amount (% of cluster GPUs) and ratio (% of idle GPU).
    """
    if policy not in POLICIES:
        raise typer.BadParameter(
            f"unknown policy {policy!r}; known: {', '.join(sorted(POLICIES))}",
            param_hint="--policy",
        )
    seed_list = parse_seeds(seeds)
    check_ratio(ratio)
    with user_errors():
        pods_path = pods or bundled_pods_path()
        trace = read_trace(nodes or bundled_nodes_path(), pods_path, skip_bad_rows=skip_bad_rows)
        node_specs = [node_spec(n) for n in trace.nodes]
        trace_pods = trace.pods
        typical = TypicalPods.from_shapes(pod_shape(p) for p in trace_pods)
        pod_specs = specs(trace_pods)
        theirs = None
        if published is not None:
            theirs = read_published(
                published,
                workload=pods_path.stem,
                policy=policy,
                seeds=set(seed_list),
                ratio=ratio,
                settings=load_settings().trace,
            )
            if len(theirs.levels) != len(LEVELS):
                raise PublishedResultsError(
                    f"{published}: {len(theirs.levels)} levels published, {len(LEVELS)} expected"
                )
        check_protocol_inputs(
            pod_specs, capacity_milli=sum(n.gpu_count for n in node_specs) * 1000, ratio=ratio
        )
        err = Console(stderr=True)
        with Progress(console=err, transient=True, disable=not err.is_terminal) as progress:
            task = progress.add_task(f"{policy}: seeds", total=len(seed_list))
            runs = seed_curves(
                node_specs,
                pod_specs,
                policy=policy,
                seeds=seed_list,
                typical=typical,
                ratio=ratio,
                workers=default_workers() if workers is None else workers,
                done=lambda: progress.advance(task),
            )
    curve = Curve.mean(runs)
    if as_json:
        out: dict[str, object] = {
            "policy": policy,
            "workload": pods_path.stem,
            "seeds": seed_list,
            "arrived_pct": list(LEVELS),
            "alloc_pct": _clean(curve.alloc_pct),
            "frag_amount_pct": _clean(curve.frag_amount_pct),
            "frag_ratio_pct": _clean(curve.frag_ratio_pct),
            "pods_arrived_per_seed": curve.pods_arrived,
            "pods_placed_per_seed": curve.pods_placed,
            "refused_rows": len(trace.refused),
        }
        if theirs is not None:
            out["published"] = {
                "seeds": list(theirs.seeds),
                "alloc_pct": _clean(theirs.alloc_pct),
                "frag_amount_pct": _clean(theirs.frag_amount_pct),
                "frag_ratio_pct": _clean(theirs.frag_ratio_pct),
            }
        typer.echo(json.dumps(out))
        return
    _render(curve, theirs, every, refused=len(trace.refused))
