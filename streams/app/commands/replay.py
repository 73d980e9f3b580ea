"""`gpufrag replay`: a real trace through the whole embedded pipeline into the history store."""

from __future__ import annotations

import asyncio
import hashlib
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Annotated

import orjson
import typer
from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn

from connectors.clickhouse.rows import refusal_row
from connectors.trace.alibaba_csv import TracePod
from connectors.trace.bundled import bundled_nodes_path, bundled_pods_path
from models import SCHEMA_VERSION, GpufragSettings, TraceSettings
from models.bounds import TIME_MAX
from models.refusal import Refusal
from streams.app.console.errors import user_errors
from streams.app.console.options import (
    POLICY_NAMES,
    JsonOption,
    NodesOption,
    PodsOption,
    StoreOption,
)
from streams.app.lifecycle.run_record import RunRecord, RunSpec, status_of
from streams.app.lifecycle.runs import StoreInterrupts
from streams.app.lifecycle.session import Session
from streams.app.replaying.replay_actions import (
    ActionsChoice,
    LoopNotes,
    action_summary,
    settings_for,
    source_of,
)
from streams.app.replaying.replay_summary import json_summary, print_summary, summary_of
from streams.app.replaying.workload import check_ratio, pod_shape, read_trace, specs
from streams.app.sinks.output_registry import SignalsTo
from streams.app.sinks.store_output import StoreOutput
from streams.fragmentation.shapes import TypicalPods
from streams.placement.experiment import check_protocol_inputs
from streams.runner.embedded import EmbeddedRunner
from streams.runner.fanout import OutputSink
from streams.simulation.cluster import (
    ReplayOptions,
    SimulatedCluster,
    TraceMode,
    TraceReplayError,
)
from streams.simulation.sim_actuator import Progress as LoopProgress
from streams.simulation.storm_tally import StormTally

SEED_MAX = 2**63 - 1
"""The runs table keeps the seed as Int64."""
MAX_INJECTED_STORMS = 10_000
"""A bound on the plan held in memory: an incident and its background OOMs take about 29
event-time minutes with the default quiet period (300 s), so 10,000 of them take 200 days,
longer than the bundled trace's 149."""


def run_id_of(
    nodes: Path,
    pods: Path,
    options: ReplayOptions,
    *,
    settings: GpufragSettings,
    actions: ActionsChoice = ActionsChoice.OFF,
) -> str:
    """The same trace, options, analysis settings and schema give the same run id, so a
    repeated replay overwrites itself; change any of them and it is a different run."""
    h = hashlib.sha256()
    h.update(f"schema {SCHEMA_VERSION}".encode())
    if actions is not ActionsChoice.OFF:  # only when on, so runs without keep their ids
        h.update(f"actions {actions.value}".encode())
        h.update(settings.planners.model_dump_json().encode())
        h.update(settings.guardrails.model_dump_json().encode())
    h.update(settings.analysis.model_dump_json().encode())
    h.update(settings.detectors.model_dump_json().encode())
    if settings.trace.start != TraceSettings().start:
        # Only when moved, so runs from before the replay honoured it keep their ids.
        h.update(f"start {settings.trace.start.isoformat()}".encode())
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
    if options.inject_oom_storms:  # only when asked, so runs without keep their ids
        fields["inject_oom_storms"] = options.inject_oom_storms
    h.update(orjson.dumps(fields, option=orjson.OPT_SORT_KEYS))
    return h.hexdigest()[:16]


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
    policy: Annotated[str, typer.Option(help=f"Placement policy: {POLICY_NAMES}.")] = "fgd",
    seed: Annotated[
        int, typer.Option(min=0, max=SEED_MAX, help="Seed of the shuffle, padding and ties.")
    ] = 42,
    ratio: Annotated[
        float,
        typer.Option(help="fgd mode: pad the workload to this x GPU capacity (up to 10)."),
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
            help="Serve Prometheus metrics (the cluster's gauges, actions, stages, queues, "
            "sink) on this port while replaying.",
        ),
    ] = None,
    skip_bad_rows: Annotated[
        bool,
        typer.Option(
            help="Replay without the trace rows that fail a check (kept in the store's "
            "dead_letter table); without it any such row stops the replay before it starts."
        ),
    ] = False,
    inject_oom_storms: Annotated[
        int,
        typer.Option(
            min=0,
            max=MAX_INJECTED_STORMS,
            help="Add N scripted OOM storms (an aggressor and 3-6 victims OOM-killed within a "
            "minute on one shared card) and 3N background OOMs below the thresholds, at times "
            "and places drawn from --seed; the summary says how many storms were found.",
        ),
    ] = 0,
    actions: Annotated[
        ActionsChoice,
        typer.Option(
            help="off: plan nothing; dry-run: plan actions through the guardrails and store "
            "them, execute none; enforce: apply allowed actions to the simulated cluster "
            "(evicted pods come back as new pods) and report what they changed. With dry-run "
            "or enforce, pending pods are evaluated at every change, not every "
            "evaluate_every_s of event time (30 s by default), so such a run reports many more "
            "unplaceable_pending signals than the same replay with off.",
        ),
    ] = ActionsChoice.OFF,
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
        if not (
            math.isfinite(ratio) and ratio > 0 and math.isfinite(time_scale) and time_scale > 0
        ):
            raise typer.BadParameter("--ratio and --time-scale must be finite and above 0")
        check_ratio(ratio)
        nodes_path = nodes or bundled_nodes_path()
        pods_path = pods or bundled_pods_path()
        session = Session("replay", store=store)
        loaded = session.settings
        trace = read_trace(
            nodes_path, pods_path, skip_bad_rows=skip_bad_rows, registry=session.registry
        )
        trace_pods = trace.pods
        source = f"trace:{pods_path.stem}"
        options = ReplayOptions(
            mode=mode,
            policy=policy,
            seed=seed,
            ratio=ratio,
            time_scale=time_scale,
            node_limit=node_limit,
            source=source,
            inject_oom_storms=inject_oom_storms,
            enforce_actions=actions is ActionsChoice.ENFORCE,
        )
        sim = SimulatedCluster(
            trace.nodes,
            trace_pods,
            options=options,
            trace=loaded.trace,
            oom_storm=loaded.detectors.oom_storm,
        )
        _check_runnable(sim, trace_pods, options, loaded.trace)
        run_id = run_id_of(nodes_path, pods_path, options, settings=loaded, actions=actions)
        baseline = None
        if actions is not ActionsChoice.OFF:
            baseline = SimulatedCluster(
                trace.nodes,
                trace_pods,
                options=replace(options, enforce_actions=False),
                trace=loaded.trace,
                oom_storm=loaded.detectors.oom_storm,
            )
        typical = TypicalPods.from_shapes(
            (pod_shape(p) for p in trace_pods), coverage=loaded.analysis.coverage
        )
        run = _Run(
            session=session,
            sim=sim,
            info=_run_info(run_id, options),
            options=options,
            refused=trace.refused,
            actions=actions,
            baseline=baseline,
        )
        code = asyncio.run(
            run.replay(typical, speed=speed, metrics_port=metrics_port, as_json=as_json)
        )
    raise typer.Exit(code)


def _check_runnable(
    sim: SimulatedCluster, pods: list[TracePod], options: ReplayOptions, trace: TraceSettings
) -> None:
    """What the simulation would only find out during the run, checked before it starts: a
    run that fails half-way leaves a failed run in the store for a problem of the input."""
    if options.mode is TraceMode.FGD:
        check_protocol_inputs(
            specs(pods), capacity_milli=sim.cluster.capacity_milli, ratio=options.ratio
        )
        return
    latest = 0
    for p in pods:
        if p.creation_time is None:
            raise TraceReplayError(
                f"pod {p.name} has no creation_time; timeline mode needs the full column "
                "layout (use the fgd mode for pod lists without times)"
            )
        latest = max(latest, p.creation_time, p.deletion_time or 0)
    # The reader bounds trace seconds for time scale 1; a scale below 1 stretches them.
    room = (TIME_MAX - trace.start).total_seconds()
    if latest / options.time_scale > room:
        raise TraceReplayError(
            f"--time-scale {options.time_scale} puts the trace's last time ({latest} s) after "
            f"{TIME_MAX:%Y-%m-%d} (from GPUFRAG_TRACE__START {trace.start:%Y-%m-%d}); "
            "use a larger --time-scale"
        )


def _run_info(run_id: str, options: ReplayOptions) -> RunSpec:
    return RunSpec(
        run_id=run_id,
        source=options.source,
        mode=options.mode.value,
        policy=options.policy,
        seed=options.seed,
        params={
            "ratio": options.ratio,
            "time_scale": options.time_scale,
            "node_limit": options.node_limit,
            "inject_oom_storms": options.inject_oom_storms,
        },
    )


@dataclass(slots=True, kw_only=True)
class _Run:
    """One replay: the simulation into the session's pipeline, its end and summary."""

    session: Session
    sim: SimulatedCluster
    info: RunSpec
    options: ReplayOptions
    refused: list[Refusal]
    actions: ActionsChoice
    baseline: SimulatedCluster | None
    wall0: float = field(default_factory=time.monotonic)

    async def replay(
        self, typical: TypicalPods, *, speed: float, metrics_port: int | None, as_json: bool
    ) -> int:
        console = Console(stderr=True)
        session, sim, options = self.session, self.sim, self.options
        # The trace's whole pod list is the expected workload, as in `gpufrag frag` and the
        # FGD paper; a live cluster learns it from the pods it sees instead. Built before the
        # run is recorded: a planner name nothing registered is the user's to fix, not an
        # abandoned run.
        variant = settings_for(self.actions, session.settings)
        pipeline = session.pipeline(typical=typical, settings=variant).build()
        session.serve_probes(metrics_port, addr="127.0.0.1")  # a taken port is the user's
        run_id = self.info.run_id
        async with session.recorded(self.info, replace=True, need_room=True) as (record, sink):
            session.require_store(sink)
            if self.refused:  # --skip-bad-rows: what was left out stays in the store, with why
                await sink.write("dead_letter", [refusal_row(r) for r in self.refused])
            tally = StormTally(session.settings.detectors.oom_storm)
            loop = LoopProgress()
            outputs = session.outputs(
                run_id,
                store=sink,
                actuator=sim.actuator if options.enforce_actions else None,
                extra=[SignalsTo(tally.observe), LoopNotes(loop)],
            )
            progress = _progress_bar(console)
            runner = EmbeddedRunner(
                source=source_of(sim, loop),
                output=outputs,
                pipeline=pipeline,
                pace=_pace(sim.start, speed),
                on_progress=progress.on_event,
                registry=session.registry,
            )
            # first: stop the source, store what was emitted; second: the store may be down,
            # so stop waiting for it and keep the buffered rows in the spool for the next start
            interrupts = StoreInterrupts(stop=runner.stop, sink=sink, console=console)
            interrupts.install()
            console.print(
                f"replaying {options.source} ({options.mode.value}, {options.policy}, seed "
                f"{options.seed}) into {session.store.dsn}, run {run_id}; Ctrl-C stops and "
                "keeps what was done",
                highlight=False,
                soft_wrap=True,
            )
            ending = _Ending(self, runner, outputs.named["store"], tally, record)
            failure: BaseException | None = None
            ended: tuple[str, dict[str, object], str | None] | None = None
            try:
                try:
                    with progress.bar:
                        await runner.run()
                except Exception as exc:  # recorded on the run, then reported
                    failure = exc
                if sink.fatal is not None:
                    # marked failed before the sink spools, which may take what room is left
                    ended = await ending.write(sink.fatal, store_trouble=True)
            finally:
                await interrupts.finish()
        if sink.fatal is not None:  # the last flush found the disk full
            ended = ended or await ending.write(sink.fatal, store_trouble=True)
        elif interrupts.forced:  # the refused write that ended the run is the stop asked for
            ended = await ending.write(None, store_trouble=True)
        else:
            ended = await ending.write(failure, store_trouble=False)
        status, summary, unrecorded = ended
        if as_json:
            typer.echo(orjson.dumps(json_summary(run_id, status, summary)).decode())
        else:
            print_summary(run_id, status, options, summary, session.store.dsn or "")
        if sink.fatal is not None:
            sink.fatal.add(_disk_full_end(unrecorded))
            raise sink.fatal
        if unrecorded is not None:
            console.print(unrecorded, highlight=False, soft_wrap=True)
        if interrupts.forced:
            interrupts.report_forced()
        if failure is not None and not interrupts.forced:
            raise failure
        return 130 if runner.interrupted else 0


@dataclass(slots=True)
class _Ending:
    """What a replay's end needs: its summary and the run's last row."""

    run: _Run
    runner: EmbeddedRunner
    output: OutputSink
    tally: StormTally
    record: RunRecord

    async def write(
        self, failure: BaseException | None, *, store_trouble: bool
    ) -> tuple[str, dict[str, object], str | None]:
        """The status and summary, written as the run's end; the third item is the line
        saying the end could not be written (see RunRecord.end)."""
        run, runner = self.run, self.runner
        assert isinstance(self.output, StoreOutput)
        sim = run.sim
        summary = summary_of(
            sim, runner, self.output, run.options, elapsed_s=time.monotonic() - run.wall0
        )
        summary["refused_rows"] = len(run.refused)
        summary.update(action_summary(sim, run.baseline, self.output, runner.pipeline.acting))
        storms = sim.injector.storms if sim.injector is not None else []
        summary.update(self.tally.counts(storms).as_summary())
        status = status_of(failure, interrupted=runner.interrupted)
        unrecorded = await self.record.end(
            status, summary, failure=failure, store_trouble=store_trouble, merge=True
        )
        return status, summary, unrecorded


def _disk_full_end(unrecorded: str | None) -> str:
    """The end of the one line a full disk stops a replay with: what the run says, and that
    running it again is safe (a re-run replaces the run; rows written twice collapse to one
    per key)."""
    marked = unrecorded or "the run is marked failed"
    return f"{marked}; free space and run the same replay again: it adds no duplicate rows"


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
