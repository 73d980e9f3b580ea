"""`gpufrag replay`'s summary: what the run did, as a table or one JSON object."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from models import SignalKind
from streams.app.sinks.store_output import StoreOutput
from streams.runner.embedded import EmbeddedRunner
from streams.simulation.cluster import ReplayOptions, SimulatedCluster, TraceMode


def summary_of(
    sim: SimulatedCluster,
    runner: EmbeddedRunner,
    output: StoreOutput,
    options: ReplayOptions,
    *,
    elapsed_s: float,
) -> dict[str, object]:
    snap = runner.pipeline.cluster.summary()
    stats = sim.stats
    return {
        "events": runner.processed,
        "failed_events": runner.failures,
        "nodes": stats.nodes,
        "pods": stats.pods,
        "bound": stats.bound,
        "failed_scheduling": stats.failed_attempts,
        "deleted": stats.deleted,
        "frag_amount_pct": round(snap.frag_amount_pct, 4),
        "frag_ratio_pct": round(snap.frag_ratio_pct, 4),
        "alloc_pct": round(snap.alloc_pct, 4),
        "unplaceable_pods": snap.unplaceable_pods,
        "stranded_nodes": snap.stranded_nodes,
        "signals": output.signal_counts,
        "elapsed_s": round(elapsed_s, 2),
        "cluster_shaping": _shaping(options),
    }


def json_summary(run_id: str, status: str, summary: dict[str, object]) -> dict[str, object]:
    """Every signal kind with both counts, zeros included, so a script needs no defaults."""
    counts = summary["signals"]
    assert isinstance(counts, dict)
    kinds = sorted(set(counts) | {k.value for k in SignalKind})
    signals = {
        k: {
            "open": counts.get(k, {}).get("open", 0),
            "resolved": counts.get(k, {}).get("resolved", 0),
        }
        for k in kinds
    }
    return {"run_id": run_id, "status": status, **summary, "signals": signals}


def _shaping(options: ReplayOptions) -> str:
    parts = []
    if options.mode is TraceMode.FGD:
        parts.append(f"FGD protocol: arrivals only, padded to {options.ratio}x GPU capacity")
    elif options.time_scale != 1.0:
        parts.append(f"time compressed {options.time_scale}x")
    else:
        parts.append("trace's own timeline (the full cluster is rarely loaded)")
    if options.node_limit:
        parts.append(f"first {options.node_limit} nodes only")
    return "; ".join(parts)


def print_summary(
    run_id: str, status: str, options: ReplayOptions, summary: dict[str, object], dsn: str
) -> None:
    table = Table(title=f"gpufrag replay {run_id} ({status})", show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value")
    sig = summary["signals"]
    assert isinstance(sig, dict)
    rows = [
        ("mode / policy / seed", f"{options.mode.value} / {options.policy} / {options.seed}"),
        ("cluster shaping", str(summary["cluster_shaping"])),
        ("nodes / pods", f"{summary['nodes']} / {summary['pods']}"),
        (
            "bound / failed attempts / deleted",
            f"{summary['bound']} / {summary['failed_scheduling']} / {summary['deleted']}",
        ),
        ("events processed (failed)", f"{summary['events']} ({summary['failed_events']})"),
        ("GPU allocated at end", f"{summary['alloc_pct']:.2f} %"),
        (
            "fragmentation at end",
            f"{summary['frag_amount_pct']:.2f} % of GPUs, "
            f"{summary['frag_ratio_pct']:.2f} % of idle",
        ),
        (
            "unplaceable pending / stranded nodes at end",
            f"{summary['unplaceable_pods']} / {summary['stranded_nodes']}",
        ),
    ]
    for kind, states in sorted(sig.items()):
        rows.append((f"signals: {kind}", ", ".join(f"{n} {s}" for s, n in sorted(states.items()))))
    if summary.get("storms_injected") or summary.get("storms_false_positive"):
        rows.append(
            (
                "OOM storms injected / found / false positives",
                f"{summary['storms_injected']} / {summary['storms_found']} / "
                f"{summary['storms_false_positive']}",
            )
        )
    if summary.get("refused_rows"):
        rows.append(("trace rows refused (in dead_letter)", str(summary["refused_rows"])))
    rows += [("elapsed", f"{summary['elapsed_s']} s"), ("store", dsn)]
    for k, v in rows:
        table.add_row(k, v)
    Console().print(table)
    Console().print("Next: gpufrag sql --list, gpufrag explain POD, gpufrag report")
