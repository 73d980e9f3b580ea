"""`gpufrag inspect`: one look at a cluster from saved kubectl and dcgm-exporter output, with no
watchers, Kafka or store.

Exit status: 0 after printing the analysis; 2 when a file cannot be read or an object in it
cannot be mapped (the line names the object and the field).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import orjson
import typer

from connectors.dcgm import parse_exposition
from connectors.kube.watch.snapshot import Snapshot, SnapshotError, read_snapshot
from models import GpufragSettings, GpuSample, Pod
from streams.app.commands.dcgm_parse import read_capped
from streams.app.console.bounded_read import fail, read_bounded
from streams.app.console.errors import user_errors
from streams.app.console.terminal import for_terminal
from streams.app.lifecycle.settings_load import load_settings
from streams.inspection import Inspection, inspect_cluster


def _json_object(head: bytes, source: str) -> None:
    """kubectl's list is a JSON object: anything else (/dev/zero's NUL bytes, a tarball) is
    refused at its first bytes, not after the bound has been read."""
    start = head.lstrip()[:1]
    if start != b"{":
        raise fail(
            f"{source} is not JSON (it starts with {start!r}); "
            "expected the output of kubectl get nodes,pods -A -o json"
        )


def _kube_bytes(path: str, settings: GpufragSettings) -> tuple[bytes, str]:
    return read_bounded(
        path,
        cap=settings.kube.snapshot_max_bytes,
        setting="GPUFRAG_KUBE__SNAPSHOT_MAX_BYTES",
        hint="kubectl's JSON is about 4.4 KB per object",
        first=_json_object,
    )


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


def _handed_over(pods: list[Pod]) -> Iterator[Pod]:
    """The pods in order, each dropped from the list as it is handed over: the analysis keeps
    its own profile of each, so 20,000 Pods need not be held beside the profiles at the peak."""
    pods.reverse()
    while pods:
        yield pods.pop()


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
            echo(f"    kube-scheduler: {for_terminal(p.scheduler_message)}")
    if snapshot.other_kinds:
        kinds = ", ".join(f"{n} {k}" for k, n in sorted(snapshot.other_kinds.items()))
        echo(f"\nleft out (not nodes or pods): {kinds}")


def inspect(
    kube_json: Annotated[
        str,
        typer.Option(
            "--kube-json",
            help="Output of `kubectl get nodes,pods -A -o json` ('-' reads stdin); on a DRA "
            "cluster add resourceslices,resourceclaims,resourceclaimtemplates,deviceclasses.",
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
    settings = load_settings()
    now = datetime.now(UTC)
    data, source = _kube_bytes(kube_json, settings)
    try:
        snapshot = read_snapshot(data, source=source, now=now, pool_label=settings.kube.pool_label)
    except SnapshotError as exc:
        raise fail(str(exc)) from None
    with user_errors():
        samples = _samples(dcgm or [], settings, now)
    pods, snapshot.pods = snapshot.pods, []
    view = inspect_cluster(
        snapshot.nodes,
        _handed_over(pods),
        samples,
        at=now,
        settings=settings.analysis,
        scheduler_messages=snapshot.pending_messages,
    )
    for warning in snapshot.warnings:
        typer.echo(f"gpufrag: warning: {warning}", err=True)
    if as_json:
        body = view.as_json()
        body["left_out"] = dict(snapshot.other_kinds)
        body["warnings"] = snapshot.warnings
        typer.echo(orjson.dumps(body, option=orjson.OPT_NON_STR_KEYS).decode())
        return
    _print_text(view, snapshot)
