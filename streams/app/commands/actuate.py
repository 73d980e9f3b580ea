"""`gpufrag actuate`: the distributed runner's actuator, from the actions topic to the cluster."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Annotated

import typer
from aiokafka import AIOKafkaConsumer
from aiokafka.errors import KafkaError

from connectors.kafka.dead_letters import DeadLetterProducer
from connectors.kafka.producer import acked_producer
from connectors.kafka.security import client_kwargs
from connectors.kube import LeaseElector
from models import GpufragSettings
from models.refusal import Refusal
from streams.app.console.errors import user_errors
from streams.app.console.options import BootstrapOption, MetricsPortOption, PrefixOption
from streams.app.lifecycle.bus import Bus
from streams.app.lifecycle.log_setup import configure_logging
from streams.app.lifecycle.probes import Health
from streams.app.lifecycle.session import Session
from streams.app.lifecycle.stopping import stop_event, unless_stopped
from streams.app.sinks.actuate_feed import ActuateFeed, actuator_for
from streams.app.sinks.actuator_breaker import BreakerGauge
from streams.app.sinks.domain_metrics import ActionsCollector, ActionTally
from streams.distributed import topics


def actuate(
    bootstrap: BootstrapOption = None,
    prefix: PrefixOption = None,
    group: Annotated[
        str, typer.Option(help="Consumer group (after the prefix); actuators in one group share.")
    ] = "gpufrag-actuator",
    duration_s: Annotated[
        float | None, typer.Option(min=0.1, help="Stop after this many seconds; default: Ctrl-C.")
    ] = None,
    loglevel: Annotated[str, typer.Option(help="Log level (stderr).")] = "warning",
    metrics_port: MetricsPortOption = None,
) -> None:
    """Carry out the workers' action requests from the actions topic and publish each outcome
    there, keyed by action id (where `gpufrag sink` stores it over the proposal).

    Enforcing only with GPUFRAG_GUARDRAILS__MODE=enforce, and then only while this process
    holds the actuator Lease (GPUFRAG_ACTUATOR__*; the cluster from GPUFRAG_KUBE__*); in any
    other mode no API client is made and every request is answered as proposed. Offsets are
    committed once the outcomes are on the topic; invalid requests go to the dead-letter topic."""
    configure_logging(loglevel)
    session = Session("actuate")
    settings, health = session.settings, session.health
    bus = Bus.resolve(bootstrap, prefix)
    tally = ActionTally()  # the records of what this actuator carried out
    session.registry.register(ActionsCollector(tally))
    breaker = BreakerGauge()
    session.registry.register(breaker)
    session.serve_probes(metrics_port, addr="0.0.0.0")
    with user_errors():
        try:
            feed = asyncio.run(_run(bus, settings, group, duration_s, health, tally, breaker))
        except KafkaError as exc:
            typer.echo(f"gpufrag: error: Kafka: {exc}", err=True)
            raise typer.Exit(1) from None
    typer.echo(f"{feed.summary()}; mode {settings.guardrails.mode}, from {bus.bootstrap}")


async def _run(
    bus: Bus,
    settings: GpufragSettings,
    group: str,
    duration_s: float | None,
    health: Health,
    tally: ActionTally,
    breaker: BreakerGauge,
) -> ActuateFeed:
    await bus.ensure_topics()
    dead = DeadLetterProducer(bus.kafka, topic=topics.DEAD_LETTER.full_name(bus.prefix))
    outcomes = acked_producer(bus.kafka, client_id="gpufrag-actuator")
    await dead.start()
    await outcomes.start()
    # ready once it can publish outcomes; a standby without the Lease is ready too: it is the
    # Lease, not the probe, that keeps it from acting
    health.require("bus connected", lambda: True)
    beat = asyncio.create_task(health.heartbeat())

    async def keep(refusal: Refusal) -> None:
        await dead.send([refusal])

    try:
        with stop_event(duration_s) as stop:
            async with actuator_for(settings) as (actuator, elector):
                breaker.watch(actuator)
                feed = ActuateFeed(
                    actuator=actuator,
                    producer=outcomes,
                    topic=topics.ACTIONS.full_name(bus.prefix),
                    dead_letter=keep,
                    holding=elector.holding if elector is not None else lambda: True,
                    tally=tally,
                    remembered_ids=settings.actuator.remembered_ids,
                )
                await _consume(bus, group, feed, elector, stop)
    finally:
        beat.cancel()
        await outcomes.stop()
        await dead.stop()
    return feed


async def _consume(
    bus: Bus, group: str, feed: ActuateFeed, elector: LeaseElector | None, stop: asyncio.Event
) -> None:
    """The group is joined only while the Lease is held: a standby takes no partitions, and
    one that loses the Lease leaves the group with its batch uncommitted, then waits again."""
    while not stop.is_set():
        if elector is not None and not await unless_stopped(elector.wait_holding(), stop):
            return
        consumer = AIOKafkaConsumer(
            topics.ACTIONS.full_name(bus.prefix),
            **client_kwargs(bus.kafka),
            group_id=f"{bus.prefix}{group}",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        await consumer.start()
        try:
            await feed.run(consumer, stop)
        finally:
            with contextlib.suppress(Exception):  # offsets not committed: read again next time
                await consumer.stop()
