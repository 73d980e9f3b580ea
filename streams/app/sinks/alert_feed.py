"""The signals topic into the alert sinks, at least once: a batch's offsets are committed only
after every sink accepted its alerts or they were dead-lettered, so a crash or a rebalance reads
them again, and the dispatcher's memory of the latest state per fingerprint drops the copies.

A partition the group has no committed offset for (a new group) starts at the signals open now,
not at the retained history, unless ``from_beginning`` (``alert_catch_up.py``); one with a
commit resumes from it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Iterable
from datetime import UTC, datetime
from typing import Any

import typer
from aiokafka import ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import CommitFailedError, IllegalStateError
from prometheus_client import CollectorRegistry

from connectors.alerts import AlertDispatcher, AlertSink, SinkNotConfigured, sinks_from
from connectors.alerts.dispatcher import DeadLetterWriter
from models import Signal, from_json
from models.component_registry import UnknownComponent
from models.refusal import Refusal
from models.settings import AlertSettings
from streams.app.console.errors import EXIT_USAGE
from streams.app.lifecycle.stopping import unless_stopped
from streams.app.sinks.alert_catch_up import OpenSetCatchUp

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
        from_beginning: bool,
        registry: CollectorRegistry | None,
    ) -> None:
        """``consumer``: a started aiokafka consumer subscribed to the signals topic with
        ``rebalance_listener()``, auto-commit off, offsets reset to the earliest.
        ``from_beginning``: a partition the group has no committed offset for is sent from its
        first record, not from the signals open now (``alert_catch_up.py``)."""
        self.consumer = consumer
        self.dispatcher = dispatcher
        self.dead_letter = dead_letter
        self.catch_up = None if from_beginning else OpenSetCatchUp(registry=registry)
        self.counts = {"records": 0, "unreadable": 0}
        self._resuming: set[TopicPartition] = set()
        """Assigned partitions read as they come, committed after each batch."""
        self._epoch = 0
        """Bumped by every rebalance: what was read or decided before it is stale."""

    def rebalance_listener(self) -> ConsumerRebalanceListener:
        return _Rebalance(self)

    def _forget(self, tps: Iterable[TopicPartition]) -> None:
        """A rebalance restarts ``tps`` from the group's commit: what was decided or held for
        them is dropped, and a batch in progress stops (its records are read again)."""
        tps = set(tps)
        self._epoch += 1
        self._resuming -= tps
        if self.catch_up is not None:
            self.catch_up.forget(tps)

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            batch = await self.consumer.getmany(timeout_ms=500, max_records=1000)
            epoch = self._epoch
            if not await self._classify(epoch):
                continue
            for tp, records in batch.items():
                for r in records:
                    if self._epoch != epoch:
                        break
                    await self._take(tp, r.offset, r.value)
            finished = await self._finish_caught_up(epoch)
            if self._epoch != epoch or (not batch and not finished):
                continue
            if not await unless_stopped(self.dispatcher.settled(), stop):
                return  # stopping: not committed, so read again by the next run
            await self._commit()

    async def _classify(self, epoch: int) -> bool:
        """Decide, once per assignment, how each newly assigned partition is read: from the
        group's commit, or (no commit, not ``from_beginning``) caught up to its end offset
        first. False when a rebalance came meanwhile."""
        catch_up = self.catch_up
        for tp in sorted(self.consumer.assignment()):
            if tp in self._resuming or (catch_up is not None and catch_up.end_of(tp) is not None):
                continue
            if catch_up is None:
                self._resuming.add(tp)
                continue
            committed = await self.consumer.committed(tp)
            end = None if committed is not None else (await self.consumer.end_offsets([tp]))[tp]
            if self._epoch != epoch:
                return False
            if end is None:
                self._resuming.add(tp)
            else:
                catch_up.begin(tp, end=end)
        return True

    async def _finish_caught_up(self, epoch: int) -> bool:
        """Send the open set of each partition whose position reached its end offset (a
        position can pass the end without a record to show it: an empty partition, or
        transaction markers at the end). True when one did."""
        if self.catch_up is None:
            return False
        finished = False
        for tp, end in sorted(self.catch_up.ends().items()):
            try:
                position = await self.consumer.position(tp)
            except IllegalStateError:
                continue  # revoked meanwhile; forgotten by the listener
            if self._epoch != epoch:
                return finished
            if position >= end:
                self._release(tp)
                finished = True
        return finished

    def _release(self, tp: TopicPartition) -> None:
        assert self.catch_up is not None
        for signal in self.catch_up.finish(tp):
            self.dispatcher.submit(signal)
        self._resuming.add(tp)

    async def _commit(self) -> None:
        """Commit the positions of the partitions read as they come; a partition still being
        caught up keeps no commit, so a restart catches it up again rather than sending the
        history from wherever the catch-up had got to."""
        try:
            offsets = {
                tp: await self.consumer.position(tp)
                for tp in sorted(self._resuming & self.consumer.assignment())
            }
            if offsets:
                await self.consumer.commit(offsets)
        except (CommitFailedError, IllegalStateError) as exc:
            # a rebalance: the records are read again, and their alerts are repeats
            log.warning("offsets not committed (%s); records will be re-read", exc)

    async def _take(self, tp: TopicPartition, offset: int, value: bytes | None) -> None:
        self.counts["records"] += 1
        signal = await self._read(tp, offset, value)
        catch_up = self.catch_up
        end = None if catch_up is None else catch_up.end_of(tp)
        if catch_up is not None and end is not None:
            if offset < end:
                if signal is not None:
                    catch_up.hold(tp, signal)
                return
            self._release(tp)  # the open set goes out before the first record after it
        if signal is not None:
            self.dispatcher.submit(signal)

    async def _read(self, tp: TopicPartition, offset: int, value: bytes | None) -> Signal | None:
        """The record's signal; None for a record that is not one, kept as a dead letter
        with why (history or not: its state cannot be known, so it is never just dropped)."""
        raw = value or b""
        try:
            return from_json(Signal, raw)
        except Exception as exc:  # kept with why, never dropped
            self.counts["unreadable"] += 1
            await self.dead_letter(
                Refusal(
                    source=f"kafka/{tp.topic}",
                    reason="unreadable_signal",
                    detail=f"{tp.topic}/{tp.partition}@{offset}: "
                    + " ".join(str(exc).split())[:500],
                    raw=Refusal.cut(raw.decode("utf-8", errors="replace")),
                    at=datetime.now(UTC),
                )
            )
            return None


class _Rebalance(ConsumerRebalanceListener):  # type: ignore[misc]
    """Tells the feed which partitions restart from the group's commit."""

    def __init__(self, feed: AlertFeed) -> None:
        self.feed = feed

    def on_partitions_revoked(self, revoked: Iterable[TopicPartition]) -> None:
        self.feed._forget(revoked)

    def on_partitions_assigned(self, assigned: Iterable[TopicPartition]) -> None:
        self.feed._forget(assigned)


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
