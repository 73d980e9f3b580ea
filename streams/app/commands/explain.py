"""`gpufrag explain POD`: why a pending pod cannot run, from the stored state."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from streams.app.commands.sql import read_run
from streams.app.errors import user_errors
from streams.app.history import open_history_to_read, store_settings
from streams.app.named_queries import QueryError

LATEST = """
SELECT ts, pod, gpu_count, gpu_milli, mig, gpu_memory_mib, cpu_milli, memory_mib,
       fits_cluster_total, fits_some_node, unplaceable, reasons, near_misses, nodes_checked
FROM pending_explanations FINAL
WHERE run_id = {run_id:String} AND pod = {pod:String}
ORDER BY ts DESC
LIMIT 1
"""


def explain(
    pod: Annotated[
        str, typer.Argument(help="The pod as namespace/name (or name: 'trace/' is assumed).")
    ],
    run: Annotated[
        str | None, typer.Option(help="Run id; default: the latest finished run.")
    ] = None,
    store: Annotated[str | None, typer.Option(help="History store DSN (as for replay).")] = None,
) -> None:
    """Show the last stored explanation of a pending pod: what blocks it on how many nodes,
    and the nodes closest to fitting it with what they lack."""
    key = pod if "/" in pod else f"trace/{pod}"
    with user_errors():
        st = open_history_to_read(store_settings(store))
        run_id = read_run(st, run)
        res = st.query(LATEST, parameters={"run_id": run_id, "pod": key})
        if not res.rows:
            raise QueryError(
                f"no pending record for {key} in run {run_id}: it was never pending at an "
                "evaluation (bound at once), or the name is wrong"
            )
    row = dict(zip(res.columns, res.rows[0], strict=True))
    console = Console()
    want = f"{row['cpu_milli']} mCPU, {row['memory_mib']} MiB"
    if row["gpu_count"]:
        want += f", {row['gpu_count']} x {row['gpu_milli']} milli-GPU"
    if row["gpu_memory_mib"] is not None:
        want += f" with {row['gpu_memory_mib']} MiB each (HAMi)"
    for profile, n in sorted(dict(row["mig"]).items()):
        want += f", {n} x MIG {profile}"
    if row["unplaceable"]:
        verdict = "fits the cluster's free total but no single node (fragmentation)"
    elif row["fits_some_node"]:
        verdict = "fits a node now; it was waiting for the scheduler"
    else:
        verdict = "does not fit even the cluster's free total (the cluster is full)"
    console.print(f"[bold]{key}[/bold] at {row['ts']} (run {run_id}): wants {want}")
    console.print(f"verdict: {verdict}; {row['nodes_checked']} nodes checked")
    reasons = row["reasons"]
    assert isinstance(reasons, dict)
    t = Table(title="blocking reasons", caption="a node can count for several", box=box.SIMPLE_HEAD)
    t.add_column("reason")
    t.add_column("nodes", justify="right")
    for reason, n in sorted(reasons.items(), key=lambda kv: (-int(kv[1]), kv[0])):
        t.add_row(str(reason), str(n))
    console.print(t)
    near = json.loads(str(row["near_misses"]))
    if near:
        t = Table(title="closest nodes, and what each lacks", box=box.SIMPLE_HEAD)
        t.add_column("node", no_wrap=True)
        t.add_column("blocked by")
        for col in ("CPU (m)", "memory (MiB)", "GPUs"):
            t.add_column(col, justify="right")
        for m in near:
            t.add_row(
                m["node"],
                ", ".join(m["reasons"]),
                str(m["missing_cpu_milli"]),
                str(m["missing_memory_mib"]),
                str(m["missing_gpus"]),
            )
        console.print(t)
