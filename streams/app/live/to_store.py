"""`gpufrag watch --bus embedded`: the sources into the embedded pipeline and the store."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import typer
from prometheus_client import CollectorRegistry
from rich.console import Console

from connectors.alerts import AlertDispatcher
from connectors.clickhouse.dsn import StoreError
from connectors.clickhouse.rows import refusal_row
from connectors.clickhouse.sink import ClickHouseSink
from connectors.clickhouse.store import Store, open_store
from connectors.live_stage import LiveMetrics
from connectors.refusals import RefusalLog
from models import GpufragSettings, StoreSettings
from models.refusal import Refusal
from models.settings import AlertSettings
from streams.app.actuate_feed import actuator_for
from streams.app.alert_feed import alerts_beside
from streams.app.history import open_history
from streams.app.live.refused import RefusalPump
from streams.app.live.sources import LiveSource, live_stage, require_listed, run_live
from streams.app.probes import Health
from streams.app.runs import StoreInterrupts, run_row
from streams.app.store_output import StoreOutput
from streams.pipeline import define_pipeline
from streams.runner.embedded import EmbeddedRunner
from streams.runner.live_stream import LiveStream


async def watch_to_store(
    sources: list[LiveSource],
    *,
    settings: GpufragSettings,
    store: StoreSettings,
    registry: CollectorRegistry,
    refusals: RefusalLog,
    metrics: LiveMetrics,
    stop: asyncio.Event,
    duration_s: float | None,
    console: Console,
    alerts: AlertSettings | None = None,
    health: Health | None = None,
) -> int:
    """All sources through one live stage into the embedded pipeline (one stage: the merged
    stream must be in event-time order for the runner), stored as one run in the history."""
    history = await asyncio.to_thread(open_history, store)
    record = _WatchRun.begin([s.name for s in sources], settings)
    run_id = record.run_id
    row = record.row
    await asyncio.to_thread(history.insert, "runs", [row("running", {})])
    sink = ClickHouseSink(lambda: open_store(store), store, registry=registry)
    await sink.start()
    output = StoreOutput(sink, run_id=run_id)
    # a live cluster learns its expected workload from the pods it sees
    pipeline = define_pipeline(settings).build()
    stream = LiveStream()
    stage = live_stage("embedded", stream, metrics, settings.watch)
    runs = [(s.name, s.build(stage.emitter(s.name))) for s in sources]
    require_listed(health, runs)
    if health is not None:
        health.require("store writable", lambda: sink.writable)
    runner = EmbeddedRunner(source=stream, output=output, pipeline=pipeline, registry=registry)

    async def live() -> None:
        try:
            await run_live(
                runs, [stage], stop=stop, metrics=metrics, duration_s=duration_s, health=health
            )
        finally:
            stream.end()

    pump = RefusalPump()
    refusals.attach(pump)
    interrupts = StoreInterrupts(stop=stop.set, sink=sink, console=console)
    interrupts.install()
    wall0 = time.monotonic()
    dispatcher: AlertDispatcher | None = None
    failure: BaseException | None = None
    try:
        async with (
            pump.running(dead_letters_into(sink)),
            alerts_beside(alerts, dead_letter=dead_letter_into(sink), registry=registry) as sent,
            actuator_for(settings) as (actuator, _),
        ):
            # enforce requests (made only with guardrails.mode=enforce) to the kube actuator;
            # in any other mode it has no API client and answers every request as proposed
            output.actuate = actuator.act
            if sent is not None:
                output.on_signal = sent.submit  # each signal to the sinks as it is stored
                dispatcher = sent  # read once stopped: what it dead-lettered then counts too
            await together(runner.run(), live())
    except Exception as exc:  # recorded on the run, then reported
        failure = exc
    finally:
        await interrupts.finish()
    if interrupts.forced:
        interrupts.report_forced()
        return 130
    summary: dict[str, object] = {
        "events": runner.processed,
        "failed_events": runner.failures,
        "late_events": stage.late,
        "refused_inputs": refusals.total(),
        "elapsed_s": round(time.monotonic() - wall0, 2),
    }
    if dispatcher is not None:
        summary["alerts"] = dispatcher.outcome()
    failure = sink.fatal or failure  # a full disk, whether the run or the last flush found it
    status = await _record_end(history, row, summary, failure=failure, disk_full=sink.fatal)
    if failure is not None:
        raise failure
    typer.echo(
        f"run {run_id} ({status}): {runner.processed} events stored into {store.dsn} "
        f"({stage.late} late, {runner.failures} failed, {refusals.total()} refused inputs, "
        f"{pump.kept} kept in dead_letter"
        + ("" if dispatcher is None else f"; {dispatcher.outcome_line()}")
        + ")"
    )
    return 0


async def _record_end(
    history: Store,
    row: Callable[[str, dict[str, object]], dict[str, object]],
    summary: dict[str, object],
    *,
    failure: BaseException | None,
    disk_full: BaseException | None,
) -> str:
    """Write the run's last row and close the history; its status."""
    if failure is not None:
        summary["error"] = f"{type(failure).__name__}: {failure}"
    status = "failed" if failure is not None else "finished"
    try:
        await asyncio.to_thread(history.insert, "runs", [row(status, summary)])
    except StoreError:
        if disk_full is None:
            raise  # with the disk full, the line about the disk says what matters
    finally:
        await asyncio.to_thread(history.close)
    return status


@dataclass(frozen=True, slots=True)
class _WatchRun:
    """The watch session's row in ``runs``, written when it starts and when it ends."""

    run_id: str
    started: datetime
    names: list[str]
    params: dict[str, object]

    @classmethod
    def begin(cls, names: list[str], settings: GpufragSettings) -> _WatchRun:
        started = datetime.now(UTC)
        ws = settings.watch
        params: dict[str, object] = {
            "sources": names,
            "allowed_delay_s": ws.allowed_delay_s,
            "progress_interval_s": ws.progress_interval_s,
        }
        run_id = f"watch-{started:%Y%m%dT%H%M%SZ}-{socket.gethostname()}"
        return cls(run_id, started, names, params)

    def row(self, status: str, summary: dict[str, object]) -> dict[str, object]:
        return run_row(
            self.run_id,
            status=status,
            started=self.started,
            source="watch:" + ",".join(self.names),
            mode="live",
            policy="",
            seed=0,
            params=self.params,
            summary=summary,
        )


def dead_letter_into(sink: ClickHouseSink) -> Callable[[Refusal], Awaitable[None]]:
    async def keep(refusal: Refusal) -> None:
        await sink.write("dead_letter", [refusal_row(refusal)])

    return keep


def dead_letters_into(sink: ClickHouseSink) -> Callable[[list[Refusal]], Awaitable[None]]:
    async def keep(batch: list[Refusal]) -> None:
        await sink.write("dead_letter", [refusal_row(r) for r in batch])

    return keep


async def together(pipeline: Coroutine[Any, Any, None], live: Coroutine[Any, Any, None]) -> None:
    """The pipeline and its live input side by side. The input ends the stream when it stops
    (cleanly or not) and the pipeline drains it; a pipeline that fails stops the input, since
    nothing would take its events any more."""
    run_task = asyncio.create_task(pipeline, name="pipeline")
    live_task = asyncio.create_task(live, name="live sources")
    try:
        done, _ = await asyncio.wait((run_task, live_task), return_when=asyncio.FIRST_EXCEPTION)
        if live_task not in done:
            live_task.cancel()
            await asyncio.gather(live_task, return_exceptions=True)
            run_task.result()
            return
        await run_task
        live_task.result()
    finally:
        for task in (run_task, live_task):
            task.cancel()
