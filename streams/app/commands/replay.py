"""`gpufrag replay`: a real trace through the whole embedded pipeline into the history store."""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import orjson
import typer
from prometheus_client import CollectorRegistry, start_http_server
from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from connectors.clickhouse.sink import ClickHouseSink
from connectors.clickhouse.store import Store, open_store
from connectors.trace.alibaba_csv import read_nodes, read_pods
from connectors.trace.bundled import bundled_nodes_path, bundled_pods_path
from models import SCHEMA_VERSION, GpufragSettings, StoreSettings
from streams.app.errors import user_errors
from streams.app.history import open_history, store_settings
from streams.app.options import JsonOption, NodesOption, PodsOption, StoreOption
from streams.app.runs import StoreInterrupts, run_row
from streams.app.store_output import StoreOutput
from streams.app.workload import pod_shape
from streams.fragmentation.shapes import TypicalPods
from streams.pipeline import define_pipeline
from streams.runner.embedded import EmbeddedRunner
from streams.simulation.cluster import ReplayOptions, SimulatedCluster, TraceMode

RUN_TABLES = (
    "events",
    "gpu_samples",
    "node_profiles",
    "task_profiles",
    "signals",
    "pending_explanations",
    "cluster_frag",
    "dead_letter",
    "runs",
)


def run_id_of(nodes: Path, pods: Path, options: ReplayOptions) -> str:
    """The same trace, options, analysis settings and schema give the same run id, so a
    repeated replay overwrites itself; change any of them and it is a different run."""
    h = hashlib.sha256()
    h.update(f"schema {SCHEMA_VERSION}".encode())
    settings = GpufragSettings()
    h.update(settings.analysis.model_dump_json().encode())
    h.update(settings.detectors.model_dump_json().encode())
    for path in (nodes, pods):
        h.update(hashlib.sha256(path.read_bytes()).digest())
    fields = {
        "mode": options.mode.value,
        "policy": options.policy,
        "seed": options.seed,
        "ratio": options.ratio,
        "time_scale": options.time_scale,
        "node_limit": options.node_limit,
    }
    h.update(orjson.dumps(fields, option=orjson.OPT_SORT_KEYS))
    return h.hexdigest()[:16]


def _run_row(
    run_id: str,
    *,
    status: str,
    started: datetime,
    source: str,
    options: ReplayOptions,
    summary: dict[str, object],
) -> dict[str, object]:
    return run_row(
        run_id,
        status=status,
        started=started,
        source=source,
        mode=options.mode.value,
        policy=options.policy,
        seed=options.seed,
        params={
            "ratio": options.ratio,
            "time_scale": options.time_scale,
            "node_limit": options.node_limit,
        },
        summary=summary,
    )


def replay(
    nodes: NodesOption = None,
    pods: PodsOption = None,
    mode: Annotated[
        TraceMode,
        typer.Option(
            help="fgd: the FGD paper's stress protocol (arrivals only, padded to --ratio x GPU "
            "capacity); timeline: the trace's own creation/deletion times."
        ),
    ] = TraceMode.FGD,
    policy: Annotated[str, typer.Option(help="Placement policy: random, best-fit, fgd.")] = "fgd",
    seed: Annotated[int, typer.Option(min=0, help="Seed of the shuffle, padding and ties.")] = 42,
    ratio: Annotated[
        float, typer.Option(help="fgd mode: pad the workload to this x GPU capacity.")
    ] = 1.3,
    time_scale: Annotated[
        float,
        typer.Option(help="timeline mode: divide trace times by this (compress a long trace)."),
    ] = 1.0,
    node_limit: Annotated[
        int | None,
        typer.Option(min=1, help="Use only the first N nodes (a small cluster fills sooner)."),
    ] = None,
    speed: Annotated[
        float,
        typer.Option(
            min=0.0, help="0: as fast as possible; N: N x the trace's own pace in event time."
        ),
    ] = 0.0,
    store: StoreOption = None,
    metrics_port: Annotated[
        int | None,
        typer.Option(
            min=1,
            max=65535,
            help="Serve Prometheus metrics (stages, queues, sink) on this port while replaying.",
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Replay a trace through the pipeline, store the history, print a summary.

    The simulated cluster's events go through the profile join and the detectors;
    events, profiles, signals, pending explanations and the cluster's fragmentation land in the
    store. Ctrl-C stops the source: everything already emitted is stored, the run is marked
    interrupted. Replaying the same trace with the same options again adds no duplicate rows.
    With --json the summary is one JSON object on stdout (progress stays on stderr).
    """
    with user_errors():
        if ratio <= 0 or time_scale <= 0:
            raise typer.BadParameter("--ratio and --time-scale must be above 0")
        nodes_path = nodes or bundled_nodes_path()
        pods_path = pods or bundled_pods_path()
        trace_nodes = read_nodes(nodes_path)
        trace_pods = read_pods(pods_path)
        source = f"trace:{pods_path.stem}"
        options = ReplayOptions(
            mode=mode,
            policy=policy,
            seed=seed,
            ratio=ratio,
            time_scale=time_scale,
            node_limit=node_limit,
            source=source,
        )
        sim = SimulatedCluster(trace_nodes, trace_pods, options=options)
        settings = store_settings(store)
        run_id = run_id_of(nodes_path, pods_path, options)
        typical = TypicalPods.from_shapes(
            (pod_shape(p) for p in trace_pods), coverage=GpufragSettings().analysis.coverage
        )
        code = asyncio.run(
            _replay(
                sim,
                settings,
                typical,
                run_id=run_id,
                options=options,
                speed=speed,
                source=source,
                metrics_port=metrics_port,
                as_json=as_json,
            )
        )
    raise typer.Exit(code)


async def _replay(
    sim: SimulatedCluster,
    settings: StoreSettings,
    typical: TypicalPods,
    *,
    run_id: str,
    options: ReplayOptions,
    speed: float,
    source: str,
    metrics_port: int | None,
    as_json: bool,
) -> int:
    console = Console(stderr=True)
    store: Store = await asyncio.to_thread(open_history, settings)
    record = _RunRecord(store, run_id, datetime.now(UTC), source, options)
    await record.start()
    registry = CollectorRegistry()
    sink = ClickHouseSink(lambda: open_store(settings), settings, registry=registry)
    await sink.start()
    output = StoreOutput(sink, run_id=run_id, track_arrivals=options.mode is TraceMode.FGD)
    # The trace's whole pod list is the expected workload, as in `gpufrag frag` and the FGD
    # paper; a live cluster learns it from the pods it sees instead.
    pipeline = define_pipeline(GpufragSettings(), typical=typical).build()
    progress = _progress_bar(console)
    runner = EmbeddedRunner(
        source=sim.events(),
        output=output,
        pipeline=pipeline,
        pace=_pace(sim.start, speed),
        on_progress=progress.on_event,
        registry=registry,
    )
    if metrics_port is not None:
        start_http_server(metrics_port, addr="127.0.0.1", registry=registry)
    # first: stop the source, store what was emitted; second: the store may be down, so stop
    # waiting for it and keep the buffered rows in the spool for the next start
    interrupts = StoreInterrupts(stop=runner.stop, sink=sink, console=console)
    interrupts.install()
    console.print(
        f"replaying {source} ({options.mode.value}, {options.policy}, seed {options.seed}) "
        f"into {settings.dsn}, run {run_id}; Ctrl-C stops and keeps what was done",
        highlight=False,
        soft_wrap=True,
    )
    wall0 = time.monotonic()
    failure: BaseException | None = None
    try:
        with progress.bar:
            await runner.run()
    except Exception as exc:  # recorded on the run, then reported
        failure = exc
    finally:
        await interrupts.finish()
    if interrupts.forced:
        interrupts.report_forced()
        return 130
    summary = _summary(sim, runner, output, options, elapsed_s=time.monotonic() - wall0)
    status = "failed" if failure else ("interrupted" if runner.interrupted else "finished")
    if failure is not None:
        summary["error"] = f"{type(failure).__name__}: {failure}"
    await record.end(status, summary)
    if as_json:
        typer.echo(orjson.dumps(_json_summary(run_id, status, summary)).decode())
    else:
        _print_summary(run_id, status, options, summary, settings.dsn or "")
    if failure is not None:
        raise failure
    return 130 if runner.interrupted else 0


@dataclass(frozen=True, slots=True)
class _RunRecord:
    """The run's row in the store: written when it starts and again when it ends."""

    store: Store
    run_id: str
    started: datetime
    source: str
    options: ReplayOptions

    async def start(self) -> None:
        """A re-run replaces the run, so rows of two analyses never mix."""
        for table in RUN_TABLES:
            if table != "dead_letter":
                await asyncio.to_thread(
                    self.store.command,
                    f"DELETE FROM {table} WHERE run_id = {{run_id:String}}",
                    {"run_id": self.run_id},
                )
        await self._write("running", {})

    async def end(self, status: str, summary: dict[str, object]) -> None:
        await self._write(status, summary)
        for table in RUN_TABLES:  # merge re-runs' duplicate keys now, not some time later
            await asyncio.to_thread(self.store.command, f"OPTIMIZE TABLE {table} FINAL")
        await asyncio.to_thread(self.store.close)

    async def _write(self, status: str, summary: dict[str, object]) -> None:
        row = _run_row(
            self.run_id,
            status=status,
            started=self.started,
            source=self.source,
            options=self.options,
            summary=summary,
        )
        await asyncio.to_thread(self.store.insert, "runs", [row])


def _pace(start: datetime, speed: float) -> Callable[[datetime], float] | None:
    """Wall seconds to wait before an event, so event time runs at ``speed`` x real time."""
    if speed <= 0:
        return None
    t0_wall = time.monotonic()

    def pace(at: datetime) -> float:
        due = (at - start).total_seconds() / speed
        return due - (time.monotonic() - t0_wall)

    return pace


@dataclass(slots=True)
class _ProgressBar:
    bar: Progress
    task: TaskID

    def on_event(self, n: int, at: datetime) -> None:
        if n % 500 == 0:
            self.bar.update(
                self.task, description=f"{n:,} events, event time {at:%Y-%m-%d %H:%M:%S}"
            )


def _progress_bar(console: Console) -> _ProgressBar:
    bar = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    )
    return _ProgressBar(bar, bar.add_task("replaying", total=None))


def _summary(
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


def _json_summary(run_id: str, status: str, summary: dict[str, object]) -> dict[str, object]:
    """Every signal kind with both counts, zeros included, so a script needs no defaults."""
    counts = summary["signals"]
    assert isinstance(counts, dict)
    kinds = sorted(set(counts) | {"fragmentation", "stranded_gpus", "unplaceable_pending"})
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


def _print_summary(
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
    rows += [("elapsed", f"{summary['elapsed_s']} s"), ("store", dsn)]
    for k, v in rows:
        table.add_row(k, v)
    Console().print(table)
    Console().print("Next: gpufrag sql --list, gpufrag explain POD, gpufrag report")
