"""`gpufrag actions`: the audit trail of what gpufrag proposed or did, and on what evidence.

An action is only worth trusting when the reason for it can be read back, so every row is shown
with its evidence. ``actions`` is a ReplacingMergeTree on ``(run_id, id)``: a retried action
keeps its last answer, so it is read with ``FINAL``.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any

import orjson
import typer
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from connectors.clickhouse.store import Store
from models.actions import ACTION_KIND_PATTERN, ActionKind, ActionMode, ActionOutcome
from streams.app.console.errors import user_errors
from streams.app.console.options import JsonOption, StoreOption, pod_key
from streams.app.lifecycle.history import open_history_to_read, store_settings
from streams.app.lifecycle.runs import RunChoice, StoredRun
from streams.app.queries.named_queries import QueryError

MAX_LIMIT = 1_000_000
SHOWN_RUN_IDS = 5

# An empty filter value matches everything, so one statement serves every combination of
# options and every value is bound, never pasted in.
MATCHING = (
    "run_id = {run_id:String} AND ({kind:String} = '' OR kind = {kind:String}) "
    "AND ({outcome:String} = '' OR outcome = {outcome:String}) "
    "AND ({mode:String} = '' OR mode = {mode:String}) "
    "AND ({pod:String} = '' OR JSONExtractString(evidence, 'beneficiary') = {pod:String})"
)
LATEST = (
    "SELECT run_id, id, kind, mode, outcome, target_scope, target, signal_fingerprint, reason, "
    f"evidence, created_at FROM actions FINAL WHERE {MATCHING} "
    "ORDER BY created_at DESC, id DESC LIMIT {limit:UInt32}"
)
COUNTS = f"SELECT kind, outcome, count() FROM actions FINAL WHERE {MATCHING} GROUP BY kind, outcome"


@dataclass(frozen=True, slots=True, kw_only=True)
class Filters:
    kind: str | None = None
    """A built-in ``ActionKind`` or an extension's kind name."""
    outcome: ActionOutcome | None = None
    mode: ActionMode | None = None
    pod: str | None = None
    """The pending pod a plan was made for (its evidence's ``beneficiary``)."""

    def parameters(self, run_id: str) -> dict[str, object]:
        return {
            "run_id": run_id,
            "kind": self.kind or "",
            "outcome": self.outcome.value if self.outcome else "",
            "mode": self.mode.value if self.mode else "",
            "pod": self.pod or "",
        }

    def options(self) -> str:
        """The filters as the user typed them, so an empty answer says what it was asked."""
        given = (
            ("kind", self.kind),
            ("outcome", self.outcome),
            ("mode", self.mode),
            ("pod", self.pod),
        )
        return " ".join(f"--{name} {value}" for name, value in given if value is not None)


@dataclass(frozen=True, slots=True, kw_only=True)
class ActionsRun:
    """A run that has actions, with its ``runs`` row when it has one: a writer that records
    actions without recording a run leaves none."""

    run_id: str
    stored: StoredRun | None
    last_action: datetime


Counts = dict[str, dict[str, int]]


def runs_with_actions(store: Store) -> list[ActionsRun]:
    """Newest first by the run's start. The actions' own times cannot order runs: a replay
    stamps them with the trace's event time, years before the run started. A run with no
    ``runs`` row comes after every run with one, newest last action first."""
    found = store.query("SELECT run_id, max(created_at) FROM actions FINAL GROUP BY run_id").rows
    stored = _stored_runs(store)
    runs = [
        ActionsRun(run_id=str(run_id), stored=stored.get(str(run_id)), last_action=last)
        for run_id, last in found
    ]
    runs.sort(key=lambda r: r.run_id)  # ties, in a stable order
    runs.sort(key=_newest_first, reverse=True)
    return runs


def _newest_first(run: ActionsRun) -> tuple[bool, datetime]:
    if run.stored is None:
        return False, run.last_action
    return True, run.stored.started_at


def _stored_runs(store: Store) -> dict[str, StoredRun]:
    rows = store.query("SELECT run_id, status, started_at, updated_at FROM runs FINAL").rows
    return {str(i): StoredRun(str(i), str(s), started, updated) for i, s, started, updated in rows}


def choose(store: Store, run_id: str | None) -> tuple[str | None, str | None]:
    """The run to show and the stderr line about it (none for a finished run the user named).
    No run at all when nothing in the store has actions; an unknown ``--run`` is an error
    that lists the runs that do have actions, since no other command lists run ids."""
    with_actions = runs_with_actions(store)
    if run_id is None:
        if not with_actions:
            return None, None
        latest = with_actions[0]
        if latest.stored is None:
            return latest.run_id, f"showing run {latest.run_id} (no row in runs)"
        note = RunChoice(run=latest.stored, explicit=False).note()
        return latest.run_id, f"{note}, the latest run with actions"
    stored = _stored_runs(store).get(run_id)
    if stored is not None:
        return run_id, RunChoice(run=stored, explicit=True).note()
    if any(r.run_id == run_id for r in with_actions):
        return run_id, f"showing run {run_id} (no row in runs)"
    raise QueryError(f"no run {run_id!r} in the store; {_known(with_actions)}")


def _known(runs: list[ActionsRun]) -> str:
    if not runs:
        return "no run in it has actions"
    shown = ", ".join(r.run_id for r in runs[:SHOWN_RUN_IDS])
    more = f" and {len(runs) - SHOWN_RUN_IDS} more" if len(runs) > SHOWN_RUN_IDS else ""
    return (
        f"runs with actions, newest first: {shown}{more} "
        "(`gpufrag actions` without --run shows the newest)"
    )


def load(store: Store, run_id: str, filters: Filters, *, limit: int) -> list[dict[str, Any]]:
    """The latest ``limit`` matching actions, oldest first so the newest is read last."""
    res = store.query(LATEST, parameters={**filters.parameters(run_id), "limit": limit})
    rows = res.dicts()
    rows.reverse()
    for row in rows:
        row["evidence"] = _evidence(str(row["evidence"]))
    return rows


def _evidence(text: str) -> object:
    """Parsed, unless another writer stored text that is not JSON: shown as it is then, since
    an audit trail that hides a record is worse than one that shows it raw."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return text


def count(store: Store, run_id: str, filters: Filters) -> Counts:
    """Every matching action, not only those ``--limit`` lets through: kinds by how many
    actions they have, then by name, and their outcomes likewise."""
    tally: Counter[tuple[str, str]] = Counter()
    for kind, outcome, n in store.query(COUNTS, parameters=filters.parameters(run_id)).rows:
        tally[(str(kind), str(outcome))] = int(n)
    per_kind: Counter[str] = Counter()
    for (kind, _), n in tally.items():
        per_kind[kind] += n
    counts: Counts = {}
    for kind in sorted(per_kind, key=lambda k: (-per_kind[k], k)):
        outcomes = sorted(((o, n) for (k, o), n in tally.items() if k == kind), key=_by_count)
        counts[kind] = dict(outcomes)
    return counts


def _by_count(item: tuple[str, int]) -> tuple[int, str]:
    return -item[1], item[0]


def tally_line(counts: Counts) -> str:
    total = sum(sum(o.values()) for o in counts.values())
    parts = []
    for kind, outcomes in counts.items():
        inner = ", ".join(f"{outcome} {n}" for outcome, n in outcomes.items())
        parts.append(f"{kind} {sum(outcomes.values())} ({inner})")
    return f"{total} action{'' if total == 1 else 's'}: " + ", ".join(parts)


def _when(at: datetime) -> str:
    aware = at if at.tzinfo else at.replace(tzinfo=UTC)
    return f"{aware.astimezone(UTC):%Y-%m-%d %H:%M:%S}"


def print_text(run_id: str, rows: list[dict[str, Any]], counts: Counts, *, evidence: bool) -> None:
    total = sum(sum(o.values()) for o in counts.values())
    shown = f"all {total}" if len(rows) == total else f"the latest {len(rows)} of {total}"
    table = Table(
        title=f"actions of run {run_id} ({shown}, oldest first)",
        box=box.SIMPLE_HEAD,
        padding=(0, 1, 0, 0),
        pad_edge=False,
    )
    for column in ("#", "time (UTC)", "kind", "mode", "outcome", "target", "signal", "reason"):
        # In a narrow terminal the free text folds and the short words stay whole; nothing is
        # cut with an ellipsis, since an audit must not hide a target.
        table.add_column(column, overflow="fold", no_wrap=column not in ("target", "reason"))
    for number, row in enumerate(rows, start=1):
        fingerprint = row["signal_fingerprint"]
        cells = (
            str(number),
            _when(row["created_at"]),
            row["kind"],
            row["mode"],
            row["outcome"],
            f"{row['target_scope']}:{row['target']}",
            fingerprint[:8] if fingerprint else "-",
            row["reason"],
        )
        table.add_row(*(Text(str(cell)) for cell in cells))  # no rich markup from stored text
    _console(table).print(table)
    if evidence:
        typer.echo("evidence:")
        for number, row in enumerate(rows, start=1):
            typer.echo(f"  #{number} {row['id']}")
            typer.echo(f"    {orjson.dumps(row['evidence'], option=orjson.OPT_SORT_KEYS).decode()}")
    more = "" if len(rows) == total else f"; the latest {len(rows)} shown (--limit)"
    typer.echo(tally_line(counts) + more)


def _console(table: Table) -> Console:
    """A terminal's width; piped or redirected, the table's full width: rich would fit it to
    80 columns, folding every target and reason, and grep would find none of them whole."""
    console = Console()
    if console.is_terminal:
        return console
    unbounded = console.options.update_width(1_000_000)
    return Console(width=max(console.width, console.measure(table, options=unbounded).maximum))


def as_json(run_id: str | None, rows: list[dict[str, Any]], counts: Counts) -> str:
    return orjson.dumps({"run_id": run_id, "actions": rows, "counts": counts}).decode()


def _empty(store: Store, run_id: str | None, filters: Filters) -> str:
    """Why nothing is shown: no actions anywhere, none in the run, or none that match."""
    if run_id is None:
        return "no actions in the store"
    if filters.options():
        stored = sum(sum(o.values()) for o in count(store, run_id, Filters()).values())
        if stored:
            return f"no actions of run {run_id} match {filters.options()} (it has {stored})"
    return f"no actions stored for run {run_id}"


def _kind_name(value: str | None) -> str | None:
    """A kind is a name, not an enum member: an extension's planner records its own kind, and
    its actions must be listable without editing this command."""
    if value is not None and re.fullmatch(ACTION_KIND_PATTERN, value) is None:
        raise typer.BadParameter("letters a-z, digits and '_', starting with a letter")
    return value


def actions(
    *,
    run: Annotated[
        str | None, typer.Option(help="Run id; default: the latest run that has actions.")
    ] = None,
    kind: Annotated[
        str | None,
        typer.Option(
            help=f"Only actions of this kind: {', '.join(ActionKind)}, or an extension's kind.",
            callback=_kind_name,
        ),
    ] = None,
    outcome: Annotated[
        ActionOutcome | None, typer.Option(help="Only actions with this outcome.")
    ] = None,
    mode: Annotated[ActionMode | None, typer.Option(help="Only actions in this mode.")] = None,
    pod: Annotated[
        str | None,
        typer.Option(
            help="Only plans made for this pending pod (namespace/name, or name: 'trace/' "
            "is assumed)."
        ),
    ] = None,
    limit: Annotated[
        int, typer.Option(min=1, max=MAX_LIMIT, help="Show at most the latest N actions.")
    ] = 50,
    evidence: Annotated[
        bool, typer.Option("--evidence/--no-evidence", help="Print each action's evidence.")
    ] = True,
    store: StoreOption = None,
    json_out: JsonOption = False,
) -> None:
    """List the actions a run proposed or executed, with the evidence each was taken on, and
    a tally by kind and outcome. The default run is the latest (by start) that has actions,
    whatever its status: an action executed by a run that died still happened."""
    filters = Filters(
        kind=kind, outcome=outcome, mode=mode, pod=None if pod is None else pod_key(pod)
    )
    with user_errors(), open_history_to_read(store_settings(store)) as st:
        run_id, note = choose(st, run)
        rows = load(st, run_id, filters, limit=limit) if run_id is not None else []
        counts = count(st, run_id, filters) if run_id is not None else {}
        empty = None if rows else _empty(st, run_id, filters)
    if note:
        typer.echo(f"gpufrag: {note}", err=True)
    if json_out:
        if empty:
            typer.echo(f"gpufrag: {empty}", err=True)
        typer.echo(as_json(run_id, rows, counts))
    elif run_id is None or empty:
        typer.echo(empty)
    else:
        print_text(run_id, rows, counts, evidence=evidence)
