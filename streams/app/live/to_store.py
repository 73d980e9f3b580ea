"""`gpufrag watch --bus embedded`: the sources into the embedded pipeline and the store."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Awaitable, Callable, Coroutine
from datetime import UTC, datetime
from typing import Any

import typer
from rich.console import Console

from connectors.alerts import AlertDispatcher
from connectors.clickhouse.rows import refusal_row
from connectors.clickhouse.sink import ClickHouseSink
from connectors.live_stage import LiveMetrics
from connectors.refusals import RefusalLog
from models import GpufragSettings
from models.refusal import Refusal
from models.settings import AlertSettings
from streams.app.lifecycle.run_record import RunSpec, status_of
from streams.app.lifecycle.runs import StoreInterrupts
from streams.app.lifecycle.session import Session
from streams.app.live.refused import RefusalPump
from streams.app.live.sources import LiveSource, live_stage, require_listed, run_live
from streams.app.sinks.actuate_feed import actuator_for
from streams.app.sinks.actuator_breaker import BreakingActuator
from streams.app.sinks.alert_feed import alerts_beside
from streams.app.sinks.domain_metrics import domain_metrics_for
from streams.runner.embedded import EmbeddedRunner
from streams.runner.fanout import Fanout
from streams.runner.live_stream import LiveStream


async def watch_to_store(
    sources: list[LiveSource],
    *,
    session: Session,
    refusals: RefusalLog,
    metrics: LiveMetrics,
    stop: asyncio.Event,
    duration_s: float | None,
    console: Console,
    alerts: AlertSettings | None = None,
) -> int:
    """All sources through one live stage into the embedded pipeline (one stage: the merged
    stream must be in event-time order for the runner), stored as one run in the history."""
    settings, health = session.settings, session.health
    info = _run_info([s.name for s in sources], settings)
    wall0 = time.monotonic()
    dispatcher: AlertDispatcher | None = None
    failure: BaseException | None = None
    async with session.recorded(info) as (record, sink):
        # a live cluster learns its expected workload from the pods it sees
        pipeline = session.pipeline().build()
        stream = LiveStream()
        stage = live_stage("embedded", stream, metrics, settings.watch)
        runs = [(s.name, s.build(stage.emitter(s.name))) for s in sources]
        require_listed(health, runs)
        session.require_store(sink)

        async def live() -> None:
            try:
                await run_live(
                    runs, [stage], stop=stop, metrics=metrics, duration_s=duration_s, health=health
                )
            finally:
                stream.end()

        runner = EmbeddedRunner(
            source=stream, output=Fanout([]), pipeline=pipeline, registry=session.registry
        )
        pump = RefusalPump()
        refusals.attach(pump)
        interrupts = StoreInterrupts(stop=stop.set, sink=sink, console=console)
        interrupts.install()
        try:
            async with (
                pump.running(dead_letters_into(sink)),
                alerts_beside(
                    alerts, dead_letter=dead_letter_into(sink), registry=session.registry
                ) as sent,
                actuator_for(settings) as (actuator, _),
            ):
                # enforce requests (made only with guardrails.mode=enforce) go to the kube
                # actuator; in any other mode it has no API client and answers every request
                # as proposed. Each signal goes to the alert sinks as it is stored.
                runner.output = session.outputs(
                    info.run_id, store=sink, alerts=sent, actuator=actuator
                )
                if isinstance(actuator, BreakingActuator):
                    domain_metrics_for(session.registry).actuator_breakers.append(actuator.is_open)
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
    status = status_of(failure)
    await record.end(status, summary, failure=failure, store_trouble=sink.fatal is not None)
    if failure is not None:
        raise failure
    typer.echo(
        f"run {info.run_id} ({status}): {runner.processed} events stored into "
        f"{session.store.dsn} ({stage.late} late, {runner.failures} failed, "
        f"{refusals.total()} refused inputs, {pump.kept} kept in dead_letter"
        + ("" if dispatcher is None else f"; {dispatcher.outcome_line()}")
        + ")"
    )
    return 0


def _run_info(names: list[str], settings: GpufragSettings) -> RunSpec:
    """The watch session's run: named for when and where it started."""
    started = datetime.now(UTC)
    ws = settings.watch
    return RunSpec(
        run_id=f"watch-{started:%Y%m%dT%H%M%SZ}-{socket.gethostname()}",
        source="watch:" + ",".join(names),
        mode="live",
        params={
            "sources": names,
            "allowed_delay_s": ws.allowed_delay_s,
            "progress_interval_s": ws.progress_interval_s,
        },
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
