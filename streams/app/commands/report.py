"""`gpufrag report`: one self-contained HTML page about a stored run, with PNG plots."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import orjson
import typer

from connectors.clickhouse.store import Store
from models.bounds import TIME_MAX, TIME_MIN
from streams.app.commands.sql import read_run
from streams.app.console.errors import user_errors
from streams.app.console.options import POLICY_NAMES
from streams.app.lifecycle.history import open_history_to_read, store_settings
from streams.app.queries.named_queries import QueryError
from streams.app.queries.recorded import Window, read_recorded
from streams.app.report.data import (
    FragPoint,
    ReportData,
    RunInfo,
    SignalRow,
    StrandedNode,
    WhatIfCurves,
)
from streams.placement.policies import POLICIES
from streams.placement.recorded_whatif import CurvePoint, replay_recorded

MAX_CURVE_POINTS = 2000


class Axis(StrEnum):
    """What the fragmentation curve is plotted against."""

    AUTO = "auto"
    ARRIVAL = "arrival"
    TIME = "time"


def load_report(store: Store, run_id: str, *, axis: Axis = Axis.AUTO) -> ReportData:
    """``axis`` auto: arrived demand for an fgd-mode replay (its workload only grows, as in the
    FGD paper's curves), time otherwise. A distributed run cannot tell what fed its topics, so
    one fed by `gpufrag publish --mode fgd` needs ``Axis.ARRIVAL`` to be read the paper's way."""
    p = {"run_id": run_id}
    run = _load_run(store, p)
    by_arrival = axis is Axis.ARRIVAL or (axis is Axis.AUTO and run.mode == "fgd")
    return ReportData(
        run=run,
        x_label="arrived GPU demand (% of capacity)" if by_arrival else "time",
        x_is_time=not by_arrival,
        frag_series=_load_frag_series(store, p, by_arrival=by_arrival),
        pending_by_reason=_load_pending_by_reason(store, p),
        stranded_nodes=_load_stranded_nodes(store, p),
        signal_counts=_load_signal_counts(store, p),
        recent_signals=_load_recent_signals(store, p),
        generated_at=datetime.now(UTC),
    )


def _load_run(store: Store, p: dict[str, str]) -> RunInfo:
    """Raises rather than returning None: every other section is meaningless without it."""
    runs = store.query(
        "SELECT run_id, source, mode, policy, seed, status, started_at, summary "
        "FROM runs FINAL WHERE run_id = {run_id:String}",
        parameters=p,
    )
    if not runs.rows:
        raise QueryError(f"no run {p['run_id']!r} in the store")
    r = dict(zip(runs.columns, runs.rows[0], strict=True))
    return RunInfo(
        run_id=str(r["run_id"]),
        source=str(r["source"]),
        mode=str(r["mode"]),
        policy=str(r["policy"]),
        seed=int(str(r["seed"])),
        status=str(r["status"]),
        started_at=_aware(r["started_at"]),
        summary=orjson.loads(str(r["summary"]) or "{}"),
    )


def _load_frag_series(
    store: Store, p: dict[str, str], *, by_arrival: bool
) -> tuple[FragPoint, ...]:
    """The fgd mode only adds pods, so its curve is plotted against arrived demand as the FGD
    paper does, a timeline against time; thinned to MAX_CURVE_POINTS to keep the page small."""
    x_expr = "arrived_pct" if by_arrival else "toUnixTimestamp64Milli(ts) / 1000"
    curve = store.query(
        f"SELECT {x_expr} AS x, frag_amount_pct, frag_ratio_pct, alloc_pct "
        "FROM cluster_frag FINAL WHERE run_id = {run_id:String} AND x IS NOT NULL ORDER BY ts",
        parameters=p,
    )
    points = [
        FragPoint(x=float(x), frag_amount_pct=a, frag_ratio_pct=rt, alloc_pct=al)
        for x, a, rt, al in curve.rows
    ]
    step = max(1, len(points) // MAX_CURVE_POINTS)
    return tuple(points[::step])


def _load_pending_by_reason(store: Store, p: dict[str, str]) -> tuple[tuple[str, int], ...]:
    """Counts distinct pods, not rows: the pending queue is evaluated again and again and
    each evaluation stores a row per pod."""
    pending = store.query(
        "SELECT reason, uniqExact(pod) AS pods FROM pending_explanations FINAL "
        "ARRAY JOIN mapKeys(reasons) AS reason WHERE run_id = {run_id:String} AND unplaceable = 1 "
        "GROUP BY reason ORDER BY pods DESC, reason",
        parameters=p,
    )
    return tuple((str(a), int(b)) for a, b in pending.rows)


def _load_stranded_nodes(store: Store, p: dict[str, str]) -> tuple[StrandedNode, ...]:
    """Only nodes whose latest stranded signal is still open, most idle GPUs first, so the
    table shows what is stranded at the end of the run rather than at any point in it."""
    stranded = store.query(
        "SELECT scope_id, argMax(evidence, ts) AS ev FROM signals FINAL "
        "WHERE run_id = {run_id:String} AND kind = 'stranded_gpus' "
        "GROUP BY scope_id HAVING argMax(state, ts) = 'open'",
        parameters=p,
    )
    nodes = []
    for node, ev_text in stranded.rows:
        ev = orjson.loads(str(ev_text))
        nodes.append(
            StrandedNode(
                node=str(node),
                pool=ev.get("pool"),
                idle_gpus=ev.get("idle_gpu_milli", 0) / 1000,
                lacks=tuple(ev.get("lacks", ())),
            )
        )
    nodes.sort(key=lambda n: (-n.idle_gpus, n.node))
    return tuple(nodes[:15])


def _load_signal_counts(store: Store, p: dict[str, str]) -> tuple[tuple[str, str, int], ...]:
    counts = store.query(
        "SELECT kind, state, count() FROM signals FINAL WHERE run_id = {run_id:String} "
        "GROUP BY kind, state ORDER BY kind, state",
        parameters=p,
    )
    return tuple((str(k), str(s), int(n)) for k, s, n in counts.rows)


def _load_recent_signals(store: Store, p: dict[str, str]) -> tuple[SignalRow, ...]:
    """One row per signal in its latest state: the signals table keeps every transition."""
    recent = store.query(
        "SELECT opened_at, argMax(resolved_at, ts) AS resolved, any(kind) AS k, "
        "any(scope_id) AS sc, argMax(summary, ts) AS sm, max(ts) AS last "
        "FROM signals FINAL WHERE run_id = {run_id:String} "
        "GROUP BY fingerprint, opened_at ORDER BY last DESC, k, sc LIMIT 25",
        parameters=p,
    )
    return tuple(
        SignalRow(
            opened_at=_aware(o),
            resolved_at=None if rs is None else _aware(rs),
            kind=str(k),
            scope_id=str(sc),
            summary=str(sm),
        )
        for o, rs, k, sc, sm, _last in recent.rows
    )


def _aware(value: object) -> datetime:
    if not isinstance(value, datetime):
        raise TypeError(f"expected a datetime, got {value!r}")
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def whatif_curves(store: Store, run_id: str, policy: str) -> WhatIfCurves:
    recorded = read_recorded(store, Window(run_id, TIME_MIN, TIME_MAX))
    if not recorded.nodes or not recorded.pods:
        raise QueryError(f"run {run_id} recorded no nodes or no pods: no what-if to show")
    result = replay_recorded(
        recorded.nodes, recorded.pods, policy=policy, seed=42, end=recorded.end
    )
    last = recorded.curve[-1] if recorded.curve else None
    return WhatIfCurves(
        policy=policy,
        recorded=tuple((p.at.timestamp(), p.alloc_pct) for p in _thin(recorded.curve)),
        whatif=tuple((p.at.timestamp(), p.alloc_pct) for p in result.curve),
        recorded_alloc_pct=None if last is None else last.alloc_pct,
        whatif_alloc_pct=result.alloc_pct,
        failed_recorded=result.failed_recorded,
        failed_whatif=result.failed_whatif,
    )


def _thin(points: list[CurvePoint]) -> list[CurvePoint]:
    return points[:: max(1, len(points) // MAX_CURVE_POINTS)]


def report(
    out: Annotated[Path, typer.Option(help="Where to write the HTML page.")] = Path(
        "gpufrag-report.html"
    ),
    run: Annotated[
        str | None, typer.Option(help="Run id; default: the latest finished run.")
    ] = None,
    store: Annotated[str | None, typer.Option(help="History store DSN (as for replay).")] = None,
    whatif: Annotated[
        str | None,
        typer.Option(
            help="Add a what-if section: the run's pods placed again under this policy "
            f"({POLICY_NAMES}), as `gpufrag whatif` does."
        ),
    ] = None,
    x: Annotated[
        Axis,
        typer.Option(
            "--x",
            help="Plot fragmentation against arrived GPU demand or time; auto: arrival for an "
            "fgd-mode replay, time otherwise (a distributed run fed by `gpufrag publish --mode "
            "fgd` needs --x arrival).",
        ),
    ] = Axis.AUTO,
) -> None:
    """Write a self-contained HTML page (PNG plots inside) about a stored run: fragmentation
    and allocation over the run, pending pods by blocking reason, top stranded nodes, signals,
    and with --whatif the run beside another placement policy."""
    with user_errors():
        if whatif is not None and whatif not in POLICIES:
            raise QueryError(f"unknown policy {whatif!r}; known: {', '.join(sorted(POLICIES))}")
        st = open_history_to_read(store_settings(store))
        run_id = read_run(st, run)
        data = load_report(st, run_id, axis=x)
        if whatif is not None:
            data = replace(data, whatif=whatif_curves(st, run_id, whatif))
        from streams.app.report.render import write_report  # matplotlib: only when asked

        path = write_report(data, out)
    typer.echo(f"wrote {path} (run {run_id})")
