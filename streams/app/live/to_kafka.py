"""`gpufrag watch --bus kafka`: each source its own publisher and live stage."""

from __future__ import annotations

import asyncio
import signal
import time

import typer

from connectors.kafka.dead_letters import DeadLetterProducer
from connectors.kafka.outlet import PublisherOutlet
from connectors.kafka.publisher import EventPublisher
from connectors.live_stage import LiveMetrics, LiveStage
from connectors.refusals import RefusalLog
from models.settings import WatchSettings
from streams.app.lifecycle.bus import Bus
from streams.app.lifecycle.probes import Health
from streams.app.live.refused import RefusalPump
from streams.app.live.sources import LiveSource, Runnable, live_stage, require_listed, run_live
from streams.distributed import topics


async def watch_to_kafka(
    sources: list[LiveSource],
    *,
    ws: WatchSettings,
    bus: Bus,
    refusals: RefusalLog,
    metrics: LiveMetrics,
    stop: asyncio.Event,
    duration_s: float | None,
    health: Health | None = None,
) -> int:
    """One publisher and live stage per source. SIGINT/SIGTERM stop cleanly; a second one
    gives up on what is not sent yet."""
    await bus.ensure_topics()
    outlets: list[PublisherOutlet] = []
    stages: list[LiveStage] = []
    runs: list[tuple[str, Runnable]] = []
    for src in sources:
        topic_of = {k.value: topics.INPUT_BY_KIND[k].full_name(bus.prefix) for k in src.kinds}
        outlet = PublisherOutlet(EventPublisher(bus.kafka, topic_of=topic_of, source=src.name))
        stage = live_stage(src.name, outlet, metrics, ws)
        outlets.append(outlet)
        stages.append(stage)
        runs.append((src.name, src.build(stage.emitter(src.name))))
    main = asyncio.current_task()
    loop = asyncio.get_running_loop()
    signals = [0]

    def on_signal() -> None:
        signals[0] += 1
        stop.set()
        if signals[0] == 2 and main is not None:
            main.cancel()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal)
    started: list[PublisherOutlet] = []
    require_listed(health, runs)
    if health is not None:
        health.require("bus connected", lambda: len(started) == len(outlets))
    dead = DeadLetterProducer(bus.kafka, topic=topics.DEAD_LETTER.full_name(bus.prefix))
    pump = RefusalPump()
    refusals.attach(pump)
    wall0 = time.monotonic()
    try:
        await dead.start()
        try:
            for outlet in outlets:
                await outlet.start()
                started.append(outlet)
            async with pump.running(dead.send):
                await run_live(
                    runs, stages, stop=stop, metrics=metrics, duration_s=duration_s, health=health
                )
        finally:
            for outlet in started:  # flushes; a second signal cancels this too
                await outlet.stop()
            await dead.stop()
    except asyncio.CancelledError:
        if signals[0] < 2:
            raise
        # the broker may be what hangs: do not wait for a flush either
        typer.echo("gpufrag: second interrupt: stopped without sending what was held", err=True)
        return 130
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
    elapsed = time.monotonic() - wall0
    for stage, outlet in zip(stages, outlets, strict=True):
        typer.echo(
            f"{stage.name}: {stage.sent} events sent ({stage.late} late), "
            f"{outlet.publisher.progress_sent} progress reports"
        )
    typer.echo(
        f"watched {elapsed:.1f} s; sent to {bus.bootstrap} (prefix {bus.prefix!r}); "
        f"{refusals.total()} refused inputs, {dead.sent} sent to {dead.topic}"
    )
    return 0
