"""`gpufrag inspect`: one look at a cluster from saved kubectl and dcgm-exporter output, with no
watchers, Kafka or store.

Exit status: 0 after printing the analysis; 2 when a file cannot be read or an object in it
cannot be mapped (the line names the object and the field).
"""

from __future__ import annotations

import asyncio
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import orjson
import typer

from connectors.dcgm import parse_exposition
from connectors.kube.snapshot import Snapshot, SnapshotError, read_snapshot
from models import GpufragSettings, GpuSample
from streams.app.commands.dcgm_parse import read_capped
from streams.app.errors import EXIT_USAGE, user_errors
from streams.inspection import Inspection, inspect_cluster

KUBE_JSON_MAX_BYTES = 1 << 30
"""kubectl's JSON is some 5-10 KB per pod: 1 GiB is 100,000+ pods, past any one cluster."""


def _fail(message: str) -> typer.Exit:
    typer.echo(f"gpufrag: error: {message}", err=True)
    return typer.Exit(EXIT_USAGE)


def _kube_bytes(path: str) -> tuple[bytes, str]:
    if path == "-":
        data = sys.stdin.buffer.read(KUBE_JSON_MAX_BYTES + 1)
        source = "stdin"
    else:
        data = read_capped(Path(path), KUBE_JSON_MAX_BYTES)
        source = path
    if len(data) > KUBE_JSON_MAX_BYTES:
        raise _fail(f"{source} is over {KUBE_JSON_MAX_BYTES} bytes")
    return data, source


def _samples(files: list[Path], settings: GpufragSettings, now: datetime) -> list[GpuSample]:
    out: list[GpuSample] = []
    for file in files:
        result = parse_exposition(
            read_capped(file, settings.dcgm.max_page_bytes),
            scraped_at=now,
            default_node=None,
            min_timestamp=settings.dcgm.min_timestamp,
        )
        refused = sum(len(r.lines) for r in result.rejected)
        if refused:
            typer.echo(
                f"gpufrag: {file}: {refused} lines refused (gpufrag dcgm-parse {file} lists them)",
                err=True,
            )
        out.extend(t.sample for t in result.samples)
    return out


def _print_text(view: Inspection, snapshot: Snapshot) -> None:
    echo = typer.echo
    echo(
        f"{view.gpus} GPUs, {view.gpus_allocated:.2f} allocated; fragmentation "
        f"{view.frag_amount_pct:.1f} % of all GPUs, {view.frag_ratio_pct:.1f} % of idle GPUs "
        f"(against {view.typical_pods} typical pod shapes learned from this snapshot)"
    )
    if not view.typical_gpu_pods:
        echo(
            "  no pod in the snapshot asks for a GPU: every idle GPU counts as fragment for the "
            "CPU-only pods it has, so the fragmentation says little here"
        )
    for node in view.nodes:
        if not node.cards:
            continue
        echo(f"\n{node.name} ({node.gpu_model})")
        for c in node.cards:
            mem = "" if c.memory_used_mib is None else f", {c.memory_used_mib:.0f} MiB used"
            shared = " (shared by " + ", ".join(c.pods) + ")" if c.memory_shared else ""
            used = f"{c.alloc_fraction:.0%} allocated"
            echo(f"  card {c.index} [{c.mode}] {used}: {c.detail}{mem}{shared}")
    if view.pending:
        echo(f"\n{len(view.pending)} pending pods:")
    for p in view.pending:
        verdict = (
            "fits a node now"
            if p.fits_some_node
            else "fragmentation: the free total fits, no node does"
            if p.fits_cluster_total
            else "the cluster lacks the free capacity"
        )
        echo(f"  {p.pod}: {verdict}")
        if p.blocking:
            on = [f"{r} on {n} node{'' if n == 1 else 's'}" for r, n in p.blocking.items()]
            lead = "other nodes blocked by " if p.fits_some_node else "blocked by "
            echo("    " + lead + ", ".join(on))
        for m in () if p.fits_some_node else p.near_misses:
            echo(f"    closest: {m.node} lacks " + ", ".join(r.value for r in m.reasons))
        if p.scheduler_message:
            echo(f"    kube-scheduler: {p.scheduler_message}")
    if snapshot.other_kinds:
        kinds = ", ".join(f"{n} {k}" for k, n in sorted(snapshot.other_kinds.items()))
        echo(f"\nleft out (not nodes or pods): {kinds}")


def inspect(
    kube_json: Annotated[
        str,
        typer.Option(
            "--kube-json",
            help="Output of `kubectl get nodes,pods -A -o json` ('-' reads stdin).",
        ),
    ],
    dcgm: Annotated[
        list[Path] | None,
        typer.Option(help="A saved dcgm-exporter page (curl <node>:9400/metrics); repeatable."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Analyse one snapshot of a cluster: each node's cards in their sharing mode (exclusive,
    time-sliced replicas, MIG instances, HAMi vGPUs), the FGD fragmentation against the
    snapshot's own pods, and why each pending pod cannot run."""
    settings = GpufragSettings()
    now = datetime.now(UTC)
    data, source = _kube_bytes(kube_json)
    try:
        snapshot = asyncio.run(
            read_snapshot(data, source=source, now=now, pool_label=settings.kube.pool_label)
        )
    except SnapshotError as exc:
        raise _fail(str(exc)) from None
    with user_errors():
        samples = _samples(dcgm or [], settings, now)
    view = inspect_cluster(
        snapshot.nodes,
        snapshot.pods,
        samples,
        at=now,
        settings=settings.analysis,
        scheduler_messages=snapshot.pending_messages,
    )
    if as_json:
        body = view.as_json()
        body["left_out"] = dict(snapshot.other_kinds)
        typer.echo(orjson.dumps(body, option=orjson.OPT_NON_STR_KEYS).decode())
        return
    _print_text(view, snapshot)
