"""Signals in, alerts out to every configured sink: deduplicated, retried, and kept as dead
letters when a sink will not take them.

Each sink has its own lane (what it still has to accept, and for Alertmanager what is open), so
one sink being down delays no other. A lane holds the latest state per fingerprint only: a
resolution that comes while the open is still unsent replaces it, and the receiver sees the
news, not every step. Nothing is dropped without a trace: an alert leaves a lane when the sink
accepted it or when its dead letter is written; a dead letter that cannot be written keeps the
alert in the lane and both are tried again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime

import orjson
from prometheus_client import CollectorRegistry

from connectors.alerts.alert import Alert, alert_of
from connectors.alerts.alert_metrics import AlertMetrics
from connectors.alerts.lane import Lane, LaneClock
from connectors.alerts.sink_registry import AlertSink
from models import Signal
from models.refusal import Refusal
from models.settings import AlertSettings

__all__ = ["STOP_DRAIN_MAX_S", "AlertDispatcher", "DeadLetterWriter"]

log = logging.getLogger(__name__)

DeadLetterWriter = Callable[[Refusal], Awaitable[None]]
"""Keeps one dead letter (the store's ``dead_letter`` table, or the dead-letter topic); raises
if it could not, so the alert stays queued."""

STOP_DRAIN_MAX_S = 10.0
"""The longest a stop waits for the sinks to take what is queued, whatever the caller asks (the
POST timeout, up to 5 min): Kubernetes kills a pod 30 s after SIGTERM by default, and what is
left must still be dead-lettered and the run's end stored in that time. A receiver that holds a
POST unanswered is the case this bounds: its alert is dead-lettered (``shutdown``)."""

RECENT_FINGERPRINTS = 100_000
"""Latest states remembered to drop repeats: a restarted worker or a re-read Kafka partition
sends signals again; 100,000 is hours of a busy cluster's signals in a few tens of MB."""


class AlertDispatcher:
    def __init__(
        self,
        sinks: Sequence[AlertSink],
        *,
        settings: AlertSettings,
        dead_letter: DeadLetterWriter,
        registry: CollectorRegistry | None = None,
        rng: random.Random | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        wall: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        if not sinks:
            raise ValueError("no alert sink configured")
        self.settings = settings
        self.metrics = AlertMetrics(registry)
        self._dead_letter = dead_letter
        self._latest: OrderedDict[str, Alert] = OrderedDict()
        self._started: list[AlertSink] = []
        clock = LaneClock(monotonic=monotonic, wall=wall)
        rng = rng or random.Random()
        self.lanes = [
            Lane(
                sink,
                settings=settings,
                dead_letter=self._keep,
                metrics=self.metrics,
                clock=clock,
                rng=rng,
            )
            for sink in sinks
        ]
        self._tasks: list[asyncio.Task[None]] = []
        self.counts = {"signals": 0, "repeats": 0, "superseded": 0}

    async def start(self) -> None:
        """Start every sink, then its lane; a sink that cannot start stops those started."""
        try:
            for lane in self.lanes:
                await lane.sink.start()
                self._started.append(lane.sink)
        except BaseException:
            await self._stop_sinks()
            raise
        self._tasks = [
            asyncio.create_task(lane.run(), name=f"alerts to {lane.sink.name}")
            for lane in self.lanes
        ]

    def submit(self, signal: Signal) -> bool:
        """Queue a signal for every sink; False when it is no news (a repeat, or an open that
        a resolution already superseded). Never blocks, never raises for a valid signal."""
        alert = alert_of(signal, self.settings)
        fp = alert.fingerprint
        prev = self._latest.get(fp)
        if prev == alert:
            self.counts["repeats"] += 1
            self.metrics.repeats.inc()
            return False
        if prev is not None and (
            (prev.resolved and not alert.resolved and alert.starts_at <= prev.starts_at)
            or alert.starts_at < prev.starts_at
        ):
            # a state of an earlier episode, come late (a redelivered record): the open of one
            # already resolved, or anything of one before a reopening (an old resolution would
            # end the live alert); a reopening has a later start
            self.counts["superseded"] += 1
            return False
        self.counts["signals"] += 1
        self._latest[fp] = alert
        self._latest.move_to_end(fp)
        if len(self._latest) > RECENT_FINGERPRINTS:
            self._latest.popitem(last=False)
        for lane in self.lanes:
            lane.put(alert)
        return True

    @property
    def pending(self) -> int:
        return sum(len(lane.pending) for lane in self.lanes)

    async def settled(self) -> None:
        """Returns once every sink has accepted or dead-lettered all it was given."""
        while not all(lane.idle.is_set() for lane in self.lanes):
            for lane in self.lanes:
                await lane.idle.wait()

    def outcome(self) -> dict[str, object]:
        """The figures a run's summary keeps: news taken, repeats and late states dropped, and
        per sink the alerts it accepted and those kept as dead letters instead."""
        return {
            **self.counts,
            "sent": {lane.sink.name: lane.counts["sent"] for lane in self.lanes},
            "dead_lettered": {lane.sink.name: lane.counts["dead_lettered"] for lane in self.lanes},
        }

    def outcome_line(self) -> str:
        """``3 alerts to webhook: 2 sent, 1 dead-lettered``, a part per sink: an alert a sink
        never took is not counted as sent."""
        parts = [
            f"to {lane.sink.name}: {lane.counts['sent']} sent, "
            f"{lane.counts['dead_lettered']} dead-lettered"
            for lane in self.lanes
        ]
        return f"{self.counts['signals']} alerts " + "; ".join(parts)

    async def stop(self, *, drain_s: float) -> None:
        """Give the sinks up to ``drain_s`` (at most ``STOP_DRAIN_MAX_S``) to take what is
        queued, then dead-letter the rest (reason ``shutdown``): a stopped process must not
        take alerts with it unrecorded, nor wait on a receiver that does not answer."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.settled(), min(drain_s, STOP_DRAIN_MAX_S))
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        for lane in self.lanes:
            await lane.give_up_all("shutdown", "gpufrag stopped before the sink accepted it")
        await self._stop_sinks()

    async def _stop_sinks(self) -> None:
        while self._started:
            sink = self._started.pop()
            try:
                await sink.stop()
            except Exception:  # one sink's close must not keep the others open
                log.exception("alert sink %s did not stop cleanly", sink.name)

    async def _keep(self, sink: str, alert: Alert, reason: str, detail: str, at: datetime) -> None:
        await self._dead_letter(
            Refusal(
                source=f"alerts/{sink}",
                reason=reason,
                detail=detail,
                raw=Refusal.cut(orjson.dumps(alert.as_json()).decode()),
                at=at,
            )
        )
