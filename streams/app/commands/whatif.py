"""`gpufrag whatif`: the store's own recorded nodes and pods placed again under another policy,
compared with what really happened."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

import orjson
import typer
from rich.console import Console
from rich.table import Table

from models.bounds import TIME_MAX, TIME_MIN
from streams.app.commands.sql import read_run
from streams.app.console.errors import user_errors
from streams.app.console.options import POLICY_NAMES, JsonOption, StoreOption
from streams.app.lifecycle.history import open_history_to_read, store_settings
from streams.app.queries.named_queries import QueryError
from streams.app.queries.recorded import Recorded, Window, read_recorded
from streams.placement.policies import POLICIES
from streams.placement.recorded_whatif import CurvePoint, WhatIf, replay_recorded

NAMES_SHOWN = 20


def whatif(
    policy: Annotated[str, typer.Option(help=f"Placement policy: {POLICY_NAMES}.")],
    run: Annotated[
        str | None, typer.Option(help="Run id; default: the latest finished run.")
    ] = None,
    since: Annotated[
        datetime | None, typer.Option(help="Window start (event time, UTC); default: the run's.")
    ] = None,
    until: Annotated[
        datetime | None, typer.Option(help="Window end (event time, UTC); default: the run's.")
    ] = None,
    seed: Annotated[int, typer.Option(min=0, help="Seed of the policy's ties.")] = 42,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Place the pods a run recorded again, in their recorded order, under --policy, and
    compare allocation, fragmentation, pods that waited or failed, and GPU-hours queued with
    what the run really did."""
    with user_errors():
        if policy not in POLICIES:
            raise QueryError(f"unknown policy {policy!r}; known: {', '.join(sorted(POLICIES))}")
        start, end = _window_bounds(_utc(since), _utc(until))
        st = open_history_to_read(store_settings(store))
        try:
            run_id = read_run(st, run)
            window = Window(run_id, start, end)
            recorded = read_recorded(st, window)
        finally:
            st.close()
        _check(recorded, window)
        result = replay_recorded(
            recorded.nodes, recorded.pods, policy=policy, seed=seed, end=recorded.end
        )
    summary = _summary(window, recorded, result, policy=policy, seed=seed)
    if as_json:
        typer.echo(orjson.dumps(summary).decode())
    else:
        _print(summary)


def _utc(t: datetime | None) -> datetime | None:
    if t is None:
        return None
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)


def _window_bounds(since: datetime | None, until: datetime | None) -> tuple[datetime, datetime]:
    """The window, refused with one line when it cannot be asked of the store: its event times
    are DateTime64 columns holding TIME_MIN..TIME_MAX, and a time outside them (year 1 or
    9999) is not a narrower or wider window but a value the query cannot bind."""
    for name, value in (("--since", since), ("--until", until)):
        if value is not None and not TIME_MIN <= value <= TIME_MAX:
            raise QueryError(
                f"{name} {value.isoformat()} is outside the event times a store holds "
                f"({TIME_MIN:%Y-%m-%d} to {TIME_MAX:%Y-%m-%d}); leave it out for the run's own"
            )
    start, end = since or TIME_MIN, until or TIME_MAX
    if start > end:
        raise QueryError(f"--since {start.isoformat()} is after --until {end.isoformat()}")
    return start, end


def _check(recorded: Recorded, window: Window) -> None:
    where = f"run {window.run_id}"
    if window.since != TIME_MIN or window.until != TIME_MAX:
        where += f" between {window.since.isoformat()} and {window.until.isoformat()}"
    if not recorded.nodes:
        raise QueryError(f"no node recorded in {where}: nothing to place pods on")
    if not recorded.pods:
        raise QueryError(f"no pod recorded in {where}: nothing to place")


def _points(curve: list[CurvePoint]) -> list[dict[str, object]]:
    step = max(1, len(curve) // 200)
    return [
        {
            "at": p.at.isoformat(),
            "alloc_pct": round(p.alloc_pct, 4),
            "frag_amount_pct": round(p.frag_amount_pct, 4),
        }
        for p in curve[::step]
    ]


def _summary(
    window: Window, recorded: Recorded, result: WhatIf, *, policy: str, seed: int
) -> dict[str, object]:
    last = recorded.curve[-1] if recorded.curve else None
    return {
        "run_id": window.run_id,
        "policy": policy,
        "seed": seed,
        "pods": result.pods,
        "nodes": len(recorded.nodes),
        "recorded_alloc_pct": None if last is None else round(last.alloc_pct, 4),
        "whatif_alloc_pct": round(result.alloc_pct, 4),
        "recorded_frag_amount_pct": None if last is None else round(last.frag_amount_pct, 4),
        "whatif_frag_amount_pct": round(result.frag_amount_pct, 4),
        "failed_recorded": result.failed_recorded,
        "failed_whatif": result.failed_whatif,
        "placed_only_whatif": len(result.placed_only_whatif),
        "placed_only_recorded": len(result.placed_only_recorded),
        "placed_only_whatif_pods": result.placed_only_whatif[:NAMES_SHOWN],
        "placed_only_recorded_pods": result.placed_only_recorded[:NAMES_SHOWN],
        "queue_gpu_hours_recorded": round(result.queue_gpu_hours_recorded, 3),
        "queue_gpu_hours_whatif": round(result.queue_gpu_hours_whatif, 3),
        "queue_gpu_hours_avoided": round(
            result.queue_gpu_hours_recorded - result.queue_gpu_hours_whatif, 3
        ),
        "curve_recorded": _points(recorded.curve),
        "curve_whatif": _points(result.curve),
    }


def _print(s: dict[str, object]) -> None:
    table = Table(title=f"gpufrag whatif: run {s['run_id']} under {s['policy']}")
    table.add_column("")
    table.add_column("recorded", justify="right")
    table.add_column("what-if", justify="right")
    rows = [
        ("GPU allocated at end, %", s["recorded_alloc_pct"], s["whatif_alloc_pct"]),
        (
            "fragmentation at end, % of GPUs",
            s["recorded_frag_amount_pct"],
            s["whatif_frag_amount_pct"],
        ),
        ("pods that never ran", s["failed_recorded"], s["failed_whatif"]),
        ("GPU-hours queued", s["queue_gpu_hours_recorded"], s["queue_gpu_hours_whatif"]),
    ]
    for label, a, b in rows:
        table.add_row(label, "-" if a is None else str(a), str(b))
    console = Console()
    console.print(table)
    console.print(
        f"{s['pods']} pods on {s['nodes']} nodes; {s['placed_only_whatif']} would have run that "
        f"did not, {s['placed_only_recorded']} ran that would not have.",
        highlight=False,
    )
