"""`gpufrag explain POD`: why a pending pod (or gang) cannot run, from the stored state."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from streams.app.commands.sql import read_run
from streams.app.console.errors import user_errors
from streams.app.console.options import pod_key
from streams.app.console.terminal import for_terminal
from streams.app.lifecycle.history import open_history_to_read, store_settings
from streams.app.queries.explained_row import explanation_json, quota_text, verdict
from streams.app.queries.gang_row import MEMBER_OF, gang_lines, is_gang
from streams.app.queries.named_queries import QueryError
from streams.app.queries.pod_fixes import (
    NoFixFound,
    capacity_text,
    fix_line,
    fixes_for,
    no_fix_for,
    no_fix_lines,
)

LATEST = """
SELECT ts, pod, gpu_count, gpu_milli, mig, gpu_memory_mib, cpu_milli, memory_mib,
       fits_cluster_total, fits_some_node, unplaceable, reasons, near_misses, nodes_checked,
       scheduler_at, scheduler_nodes, scheduler_reasons, scheduler_message, agrees, disagreement,
       quota_blocker, quota_resource, quota_requested, quota_used, quota_nominal, quota_limit,
       quota_room, gang, gang_min_member, gang_bound, gang_members, gang_placeable_together,
       gang_needed, gang_member_shown
FROM pending_explanations FINAL
WHERE run_id = {run_id:String} AND pod = {pod:String}
ORDER BY ts DESC
LIMIT 1
"""


def explain(
    pod: Annotated[
        str,
        typer.Argument(
            help="The pod as namespace/name (or name: 'trace/' is assumed), or a gang as "
            "namespace/gang:NAME; a gang's member is answered with its gang."
        ),
    ],
    run: Annotated[
        str | None, typer.Option(help="Run id; default: the latest finished run.")
    ] = None,
    store: Annotated[str | None, typer.Option(help="History store DSN (as for replay).")] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the stored explanation as one JSON object.")
    ] = False,
) -> None:
    """Show the last stored explanation of a pending pod or gang: what blocks it on how many
    nodes, the queue or quota that holds it with its figures, beside kube-scheduler's own
    verdict when it gave one, and the nodes closest to fitting it with what they lack; for a
    gang, its minMember, members bound and pending, and how many fit together."""
    asked = pod_key(pod)
    with user_errors():
        st = open_history_to_read(store_settings(store))
        run_id = read_run(st, run)
        key = asked
        res = st.query(LATEST, parameters={"run_id": run_id, "pod": key})
        if not res.rows:
            gang = st.query(MEMBER_OF, parameters={"run_id": run_id, "pod": key}).rows
            if gang:  # a gang's members have no rows of their own
                key = str(gang[0][0])
                res = st.query(LATEST, parameters={"run_id": run_id, "pod": key})
        if not res.rows:
            raise QueryError(
                f"no pending record for {key} in run {run_id}: it was never pending at an "
                "evaluation (bound at once), or the name is wrong"
            )
        fixes, fix_counts = fixes_for(st, run_id, key)
        no_fix = no_fix_for(st, run_id, key)
    row = dict(zip(res.columns, res.rows[0], strict=True))
    if as_json:
        out = explanation_json(row, run_id=run_id)
        out["asked"] = asked
        out["fixes"] = [_fix_json(f) for f in fixes]
        out["fix_counts"] = fix_counts
        out["no_fix"] = None if no_fix is None else no_fix.to_json()
        out["capacity_shortage"] = capacity_text(row)
        typer.echo(json.dumps(out, sort_keys=True, default=str))
        return
    console = Console()
    if key != asked:
        console.print(f"{asked} waits as a member of gang {key}: the gang's row follows")
    _print_row(console, key, row, run_id)
    console.print(_fix_lines(key, row, fixes, fix_counts, no_fix), soft_wrap=True)


def _print_row(console: Console, key: str, row: dict[str, Any], run_id: str) -> None:
    """The stored row: what it asks, the verdict, the reasons and the closest nodes."""
    want = f"{row['cpu_milli']} mCPU, {row['memory_mib']} MiB"
    if row["gpu_count"]:
        want += f", {row['gpu_count']} x {row['gpu_milli']} milli-GPU"
    if row["gpu_memory_mib"] is not None:
        want += f" with {row['gpu_memory_mib']} MiB each (HAMi)"
    for profile, n in sorted(dict(row["mig"]).items()):
        want += f", {n} x MIG {profile}"
    if is_gang(row):
        console.print(f"[bold]{key}[/bold] at {row['ts']} (run {run_id})")
        for line in gang_lines(row):
            console.print(escape(for_terminal(line, limit=600)), soft_wrap=True)
        console.print(f"{row['gang_member_shown']} wants {want}")
    else:
        console.print(f"[bold]{key}[/bold] at {row['ts']} (run {run_id}): wants {want}")
    said = escape(for_terminal(verdict(row), limit=400))
    console.print(f"verdict: {said}; {row['nodes_checked']} nodes checked")
    held = quota_text(row)
    if held is not None:  # one line however narrow the terminal: it is what a reader greps for
        console.print(escape(for_terminal(held, limit=400)), soft_wrap=True)
    console.print(_reasons_table(row))
    if row["scheduler_at"] is not None:
        console.print(_scheduler_lines(row))
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


def _fix_json(row: dict[str, Any]) -> dict[str, Any]:
    return {k: row[k] for k in ("id", "kind", "mode", "outcome", "target", "reason", "evidence")}


def _fix_lines(
    key: str,
    row: dict[str, Any],
    fixes: list[dict[str, Any]],
    counts: dict[str, int],
    no_fix: NoFixFound | None,
) -> str:
    """The proven fix beside the cause: the plans stored for this pod, admitted first; and,
    where the planners found none, which guardrail or shortage stops it; for a pod the
    cluster's free total cannot take, that no planner runs for it, and why."""
    lines = []
    if fixes:
        tally = ", ".join(f"{n} {outcome}" for outcome, n in sorted(counts.items()))
        lines.append(f"fix: {tally} plan(s) for it; gpufrag actions --pod {key} lists them all")
        lines += [f"  {escape(for_terminal(fix_line(f), limit=600))}" for f in fixes]
    if no_fix is not None:
        found = no_fix_lines(no_fix, blocker=row.get("quota_blocker"))
        lines += [escape(for_terminal(line, limit=600)) for line in found]
    short = capacity_text(row)
    if not lines and short is not None:
        return escape(for_terminal(short, limit=600))
    if not lines:
        return (
            "fix: no plan stored for this pod in this run: the run planned no actions "
            "(replay --actions dry-run or enforce), the pod was never unplaceable nor held "
            "by a full queue (plans are made for those only), or, in a dry run, it fits the "
            "room an earlier plan frees (the dry run counts its plans as done)"
        )
    return "\n".join(lines)


def _reasons_table(row: dict[str, Any]) -> Table:
    """gpufrag's reasons, and the scheduler's beside them when it gave a verdict: both count
    nodes, the scheduler each node once (its first failing filter), gpufrag every reason."""
    ours: dict[str, int] = {str(k): int(v) for k, v in dict(row["reasons"]).items()}
    theirs: dict[str, int] = {str(k): int(v) for k, v in dict(row["scheduler_reasons"]).items()}
    both = row["scheduler_at"] is not None
    caption = "a node can count for several" + (
        "; the scheduler counts each node once" if both else ""
    )
    t = Table(title="blocking reasons", caption=caption, box=box.SIMPLE_HEAD)
    t.add_column("reason")
    t.add_column("nodes (gpufrag)" if both else "nodes", justify="right")
    if both:
        t.add_column("nodes (kube-scheduler)", justify="right")
    names = sorted(set(ours) | set(theirs), key=lambda r: (-ours.get(r, 0), -theirs.get(r, 0), r))
    for reason in names:
        cells = [escape(for_terminal(reason, limit=200)), str(ours.get(reason, "-"))]
        if both:
            cells.append(str(theirs.get(reason, "-")))
        t.add_row(*cells)
    return t


def _scheduler_lines(row: dict[str, Any]) -> str:
    """When the scheduler said it, and whether it agrees with gpufrag."""
    of = f" (0/{row['scheduler_nodes']} nodes available)" if row["scheduler_nodes"] else ""
    lines = [f"kube-scheduler's verdict at {row['scheduler_at']}{of}"]
    if row["scheduler_message"]:
        message = for_terminal(str(row["scheduler_message"]))
        lines.append(f"  not read, as it wrote it: {escape(message)}")
    if row["agrees"] is None:
        lines.append(
            "agreement: not compared (the scheduler's verdict rests on reasons gpufrag does "
            "not model: affinity, volumes, ports, ...)"
        )
    elif row["agrees"]:
        lines.append("agreement: the scheduler's reasons are among gpufrag's")
    else:
        disagreement = escape(for_terminal(str(row["disagreement"])))
        lines.append(f"agreement: [bold]they disagree[/bold]: {disagreement}")
    return "\n".join(lines)
