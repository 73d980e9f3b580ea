"""`gpufrag alert`: the workers' signals from Kafka to the alert sinks (Alertmanager, Slack, a
webhook, a plugin's)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Annotated

import typer
from aiokafka import AIOKafkaConsumer
from aiokafka.errors import KafkaError
from prometheus_client import CollectorRegistry

from connectors.alerts import AlertDispatcher, AlertSink
from connectors.kafka.dead_letters import DeadLetterProducer
from connectors.kafka.security import client_kwargs
from models.refusal import Refusal
from models.settings import AlertSettings
from streams.app.console.errors import user_errors
from streams.app.console.options import BootstrapOption, MetricsPortOption, PrefixOption
from streams.app.lifecycle.bus import Bus
from streams.app.lifecycle.log_setup import configure_logging
from streams.app.lifecycle.probes import Health
from streams.app.lifecycle.session import Session
from streams.app.lifecycle.stopping import stop_event
from streams.app.sinks.alert_feed import AlertFeed, alert_sinks
from streams.distributed import topics


def alert(
    bootstrap: BootstrapOption = None,
    prefix: PrefixOption = None,
    group: Annotated[
        str, typer.Option(help="Consumer group (after the prefix); alerters in one group share.")
    ] = "gpufrag-alert",
    metrics_port: MetricsPortOption = None,
    duration_s: Annotated[
        float | None, typer.Option(min=0.1, help="Stop after this many seconds; default: Ctrl-C.")
    ] = None,
    from_beginning: Annotated[
        bool,
        typer.Option(
            "--from-beginning",
            help="A new group sends the whole retained history, resolved signals included "
            "(default: only the signals open now); a group with commits resumes from them.",
        ),
    ] = False,
    loglevel: Annotated[str, typer.Option(help="Log level (stderr).")] = "warning",
) -> None:
    """Send the workers' signals to the configured alert sinks (GPUFRAG_ALERTS__*).

    A new group (no committed offset) starts at the signals open now, each sent once in its
    latest state, and skips the rest of the retained history (counted and logged): its first
    run would otherwise flood Slack and the webhook with days of resolved signals. A group with
    commits resumes from them. Offsets are committed once every sink accepted a batch's alerts
    or they were kept as dead letters on the dead-letter topic (where `gpufrag sink` stores
    them)."""
    configure_logging(loglevel)
    session = Session("alert")
    settings = session.settings.alerts
    sinks = alert_sinks(settings)
    registry, health = session.registry, session.health
    session.serve_probes(metrics_port, addr="0.0.0.0")
    bus = Bus.resolve(bootstrap, prefix)
    with user_errors():
        try:
            feed = asyncio.run(
                _run(
                    bus,
                    settings,
                    sinks,
                    group=group,
                    from_beginning=from_beginning,
                    registry=registry,
                    health=health,
                    duration_s=duration_s,
                )
            )
        except KafkaError as exc:
            typer.echo(f"gpufrag: error: Kafka: {exc}", err=True)
            raise typer.Exit(1) from None
    d = feed.dispatcher
    typer.echo(
        f"{feed.counts['records']} signal records from {bus.bootstrap}: {d.outcome_line()}; "
        f"{d.counts['repeats']} repeats dropped, "
        f"{feed.counts['unreadable']} unreadable (dead-lettered), "
        f"{feed.catch_up.skipped_total if feed.catch_up else 0} history records skipped"
    )


async def _run(
    bus: Bus,
    settings: AlertSettings,
    sinks: list[AlertSink],
    *,
    group: str,
    from_beginning: bool,
    registry: CollectorRegistry,
    health: Health,
    duration_s: float | None,
) -> AlertFeed:
    await bus.ensure_topics()
    dead = DeadLetterProducer(bus.kafka, topic=topics.DEAD_LETTER.full_name(bus.prefix))
    await dead.start()

    async def keep(refusal: Refusal) -> None:
        await dead.send([refusal])

    dispatcher = AlertDispatcher(sinks, settings=settings, dead_letter=keep, registry=registry)
    consumer = AIOKafkaConsumer(
        **client_kwargs(bus.kafka),
        group_id=f"{bus.prefix}{group}",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        # a batch is held until its alerts are accepted or dead-lettered (give_up_after_s);
        # the group must not count the member gone meanwhile (Kafka's default is 5 min)
        max_poll_interval_ms=int((settings.give_up_after_s + 120) * 1000),
    )
    feed = AlertFeed(
        consumer=consumer,
        dispatcher=dispatcher,
        dead_letter=keep,
        from_beginning=from_beginning,
        registry=registry,
    )
    # the listener tells the feed which partitions restart from the group's commit
    consumer.subscribe([topics.SIGNALS.full_name(bus.prefix)], listener=feed.rebalance_listener())
    await consumer.start()
    await dispatcher.start()
    health.require("partitions assigned", lambda: bool(consumer.assignment()))
    beat = asyncio.create_task(health.heartbeat())
    try:
        with stop_event(duration_s) as stop:
            await feed.run(stop)
    finally:
        beat.cancel()
        with contextlib.suppress(Exception):  # offsets not committed: read again next time
            await consumer.stop()
        # what a sink has not taken by now is dead-lettered, not taken away unrecorded
        await dispatcher.stop(drain_s=settings.timeout_s)
        await dead.stop()
    return feed
