"""The signals topic into the alert sinks, at least once: a batch's offsets are committed only
after every sink accepted its alerts or they were dead-lettered, so a crash or a rebalance reads
them again, and the dispatcher's memory of the latest state per fingerprint drops the copies.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import typer
from aiokafka.errors import CommitFailedError
from prometheus_client import CollectorRegistry

from connectors.alerts import AlertDispatcher, AlertSink, SinkNotConfigured, sinks_from
from connectors.alerts.dispatcher import DeadLetterWriter
from models import Signal, from_json
from models.component_registry import UnknownComponent
from models.refusal import Refusal
from models.settings import AlertSettings
from streams.app.console.errors import EXIT_USAGE
from streams.app.lifecycle.stopping import unless_stopped

__all__ = ["NO_SINK", "AlertFeed", "alert_sinks", "alerts_beside"]

log = logging.getLogger(__name__)

NO_SINK = (
    "no alert sink: set GPUFRAG_ALERTS__ALERTMANAGER_URL, GPUFRAG_ALERTS__SLACK_WEBHOOK_URL "
    "or GPUFRAG_ALERTS__WEBHOOK_URL, or name a plugin's sink in GPUFRAG_ALERTS__SINKS"
)


def alert_sinks(settings: AlertSettings) -> list[AlertSink]:
    """The sinks the settings switch on; none, or a name nobody registered, stops the command
    at start in one line (exit 2): a run that sends nowhere would look healthy."""
    try:
        sinks = sinks_from(settings)
    except (UnknownComponent, SinkNotConfigured) as exc:
        typer.echo(f"gpufrag: error: {exc}", err=True)
        raise typer.Exit(EXIT_USAGE) from None
    if not sinks:
        typer.echo(f"gpufrag: error: {NO_SINK}", err=True)
        raise typer.Exit(EXIT_USAGE)
    return sinks


class AlertFeed:
    def __init__(
        self,
        *,
        consumer: Any,
        dispatcher: AlertDispatcher,
        dead_letter: DeadLetterWriter,
    ) -> None:
        """``consumer``: a started aiokafka consumer on the signals topic, auto-commit off."""
        self.consumer = consumer
        self.dispatcher = dispatcher
        self.dead_letter = dead_letter
        self.counts = {"records": 0, "unreadable": 0}

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            batch = await self.consumer.getmany(timeout_ms=500, max_records=1000)
            if not batch:
                continue
            for tp, records in batch.items():
                for r in records:
                    await self._take(tp.topic, tp.partition, r.offset, r.value)
            if not await unless_stopped(self.dispatcher.settled(), stop):
                return  # stopping: not committed, so read again by the next run
            try:
                await self.consumer.commit()
            except CommitFailedError as exc:
                # a rebalance: the records are read again, and their alerts are repeats
                log.warning("offsets not committed (%s); records will be re-read", exc)

    async def _take(self, topic: str, partition: int, offset: int, value: bytes | None) -> None:
        self.counts["records"] += 1
        raw = value or b""
        try:
            signal = from_json(Signal, raw)
        except Exception as exc:  # kept with why, never dropped
            self.counts["unreadable"] += 1
            await self.dead_letter(
                Refusal(
                    source=f"kafka/{topic}",
                    reason="unreadable_signal",
                    detail=f"{topic}/{partition}@{offset}: " + " ".join(str(exc).split())[:500],
                    raw=Refusal.cut(raw.decode("utf-8", errors="replace")),
                    at=datetime.now(UTC),
                )
            )
            return
        self.dispatcher.submit(signal)


@contextlib.asynccontextmanager
async def alerts_beside(
    settings: AlertSettings | None,
    *,
    dead_letter: DeadLetterWriter,
    registry: CollectorRegistry,
) -> AsyncIterator[AlertDispatcher | None]:
    """The embedded runner's alerts: a dispatcher running while the block runs (None without
    ``settings``), stopped before the block's store closes, so what a sink has not taken by
    then is dead-lettered into that store."""
    if settings is None:
        yield None
        return
    dispatcher = AlertDispatcher(
        sinks_from(settings), settings=settings, dead_letter=dead_letter, registry=registry
    )
    await dispatcher.start()
    try:
        yield dispatcher
    finally:
        await dispatcher.stop(drain_s=settings.timeout_s)
