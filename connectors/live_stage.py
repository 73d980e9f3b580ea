"""Live sources onto a bus (Kafka, or the embedded runner in process): hold their events
briefly, send them in event-time order, report progress every second.

A publisher's progress report promises that nothing earlier follows, so its events must go out
in event-time order. Live sources do not emit in that order: a Kubernetes Event carries its own
timestamp, an OOM kill its container's finish time, a GPU sample the time its scrape started. A
live stage holds each event for ``allowed_delay_s`` of wall time, sends the ones older than now
minus that in event-time order, and reports progress up to there every interval, events or
not, so that a quiet source never holds the workers back.

An event that comes after its time was reported cannot be put in order any more. Dropping it
would lose it and re-timing it would falsify it, so it is sent as it is, without a promise
(``Outlet.send_late``), and counted: a worker stage that has not yet passed its time still uses
it, one that has dead-letters it as late, with the reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge

from models import Envelope

__all__ = [
    "Emit",
    "LiveMetrics",
    "LiveReorder",
    "LiveStage",
    "Outlet",
    "Release",
]

log = logging.getLogger(__name__)

LATE_LOG_EVERY = timedelta(minutes=1)
"""Late events are counted each; a log line says how many at most this often."""

Clock = Callable[[], datetime]
Emit = Callable[[Envelope], Awaitable[None]]


def _wall_clock() -> datetime:
    return datetime.now(UTC)


@dataclass(slots=True)
class Release:
    """What one step of a live stage hands on."""

    events: list[Envelope] = field(default_factory=list)
    """In event-time order (arrival order within one instant)."""
    late: list[Envelope] = field(default_factory=list)
    """Came after progress past their time was reported; in arrival order."""
    upto: datetime | None = None
    """Progress to report now; None when it has not moved."""


class LiveReorder:
    """The holding and ordering alone, with time from ``now``: no I/O, so it is tested with a
    fake clock."""

    def __init__(self, *, allowed_delay_s: float, now: Clock = _wall_clock) -> None:
        if allowed_delay_s < 0:
            raise ValueError("allowed_delay_s must not be negative")
        self.delay = timedelta(seconds=allowed_delay_s)
        self.now = now
        self.reported: datetime | None = None
        """Progress handed out so far: every event at or before it has been released."""
        self._heap: list[tuple[datetime, int, Envelope]] = []
        self._late: list[Envelope] = []
        self._arrived = 0

    def __len__(self) -> int:
        return len(self._heap) + len(self._late)

    def add(self, env: Envelope) -> bool:
        """Hold an event; True when it is late (its time is already reported)."""
        if self.reported is not None and env.event_time <= self.reported:
            self._late.append(env)
            return True
        self._arrived += 1
        heapq.heappush(self._heap, (env.event_time, self._arrived, env))
        return False

    def release(self) -> Release:
        """The events older than now minus the allowed delay, and progress up to there. A wall
        clock stepped back never takes progress back: it only releases later."""
        cutoff = self.now() - self.delay
        if self.reported is not None and cutoff <= self.reported:
            return Release(late=self._take_late())
        out = Release(events=self._pop(cutoff), late=self._take_late(), upto=cutoff)
        self.reported = cutoff
        return out

    def release_all(self) -> Release:
        """Everything held, for when the sources have stopped: nothing else will come, so
        progress goes up to now (or the latest event, if its clock runs ahead)."""
        events = self._pop(None)
        upto = self.now()
        if events and events[-1].event_time > upto:
            upto = events[-1].event_time
        if self.reported is not None and upto <= self.reported:
            return Release(events=events, late=self._take_late())
        self.reported = upto
        return Release(events=events, late=self._take_late(), upto=upto)

    def _pop(self, upto: datetime | None) -> list[Envelope]:
        heap = self._heap
        out: list[Envelope] = []
        while heap and (upto is None or heap[0][0] <= upto):
            out.append(heapq.heappop(heap)[2])
        return out

    def _take_late(self) -> list[Envelope]:
        late, self._late = self._late, []
        return late


class Outlet(Protocol):
    """Where a live stage sends: a Kafka publisher, or the embedded runner's input."""

    async def send(self, env: Envelope) -> None:
        """In event-time order, each after the previous one."""

    async def send_late(self, env: Envelope) -> None:
        """Out of order: its time was already reported."""

    async def progress(self, upto: datetime) -> None:
        """Everything at or before ``upto`` has been sent."""


class LiveMetrics:
    """Per-source counters every live source gets, whatever it is (the NVML sampler has no
    metrics of its own), on the registry the sources' own metrics share."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.events = Counter(
            "gpufrag_watch_events_total",
            "Events a live source emitted",
            ["source"],
            registry=registry,
        )
        self.late = Counter(
            "gpufrag_watch_late_events_total",
            "Events that came after progress past their time was reported (sent anyway)",
            ["source"],
            registry=registry,
        )
        self.last_event = Gauge(
            "gpufrag_watch_last_event_timestamp_seconds",
            "Wall-clock time of a live source's latest event (POSIX s)",
            ["source"],
            registry=registry,
        )
        self.failures = Counter(
            "gpufrag_watch_source_failures_total",
            "Times a live source stopped with an error and was restarted",
            ["source"],
            registry=registry,
        )
        self.held = Gauge(
            "gpufrag_watch_held_events",
            "Events a live stage holds for ordering",
            ["stage"],
            registry=registry,
        )
        self.progress = Gauge(
            "gpufrag_watch_progress_timestamp_seconds",
            "Event time up to which a live stage has reported progress (POSIX s)",
            ["stage"],
            registry=registry,
        )


class LiveStage:
    """One publisher's worth of live sources: they emit into it, it sends to ``outlet``.

    ``run`` steps every ``interval_s`` until told the sources are done, then sends what is
    still held and reports progress a last time. The sources wait in ``emit`` while
    ``max_held`` events are held, so an outlet that is stuck does not grow memory."""

    def __init__(
        self,
        *,
        name: str,
        outlet: Outlet,
        metrics: LiveMetrics,
        allowed_delay_s: float,
        interval_s: float = 1.0,
        max_held: int = 100_000,
        now: Clock = _wall_clock,
    ) -> None:
        if interval_s <= 0 or max_held < 1:
            raise ValueError("interval_s must be positive and max_held at least 1")
        self.name = name
        self.outlet = outlet
        self.metrics = metrics
        self.interval_s = interval_s
        self.max_held = max_held
        self.now = now
        self.reorder = LiveReorder(allowed_delay_s=allowed_delay_s, now=now)
        self.sent = 0
        self.late = 0
        self._room = asyncio.Event()
        self._closed = False
        self._late_since_log = 0
        self._late_logged_at: datetime | None = None
        self._late_example = ""

    def emitter(self, source: str) -> Emit:
        """The ``emit`` callback for one source, counted under its name."""
        m = self.metrics
        for counter in (m.events, m.late, m.failures):
            counter.labels(source)  # every source's series exist from the start, at 0

        async def emit(env: Envelope) -> None:
            while len(self.reorder) >= self.max_held and not self._closed:
                self._room.clear()
                await self._room.wait()
            if self._closed:
                raise RuntimeError(f"live stage {self.name} is closed")
            self.metrics.events.labels(source).inc()
            self.metrics.last_event.labels(source).set(self.now().timestamp())
            if self.reorder.add(env):
                self._count_late(source, env)

        return emit

    async def step(self) -> None:
        """Send what is due and report progress; called every interval by ``run``."""
        await self._send(self.reorder.release())

    async def close(self) -> None:
        """The sources have stopped: send everything held, report progress a last time."""
        try:
            await self._send(self.reorder.release_all())
        finally:
            self._closed = True
            self._room.set()
            self._log_late(force=True)

    async def run(self, *, until: asyncio.Event) -> None:
        try:
            while not until.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(until.wait(), self.interval_s)
                if not until.is_set():
                    await self.step()
        except BaseException:
            self._closed = True  # no source may wait in emit for a stage that is gone
            self._room.set()
            raise
        await self.close()

    async def _send(self, release: Release) -> None:
        for env in release.late:
            await self.outlet.send_late(env)
            self.sent += 1
        for env in release.events:
            await self.outlet.send(env)
            self.sent += 1
        if release.upto is not None:
            await self.outlet.progress(release.upto)
            self.metrics.progress.labels(self.name).set(release.upto.timestamp())
        self.metrics.held.labels(self.name).set(len(self.reorder))
        self._room.set()
        self._log_late()

    def _count_late(self, source: str, env: Envelope) -> None:
        self.late += 1
        self.metrics.late.labels(source).inc()
        self._late_since_log += 1
        reported = self.reorder.reported
        self._late_example = (
            f"{env.kind.value} {env.key} at {env.event_time.isoformat()} from {source}, "
            f"progress already reported up to {reported.isoformat() if reported else '-'}"
        )

    def _log_late(self, *, force: bool = False) -> None:
        if not self._late_since_log:
            return
        now = self.now()
        last = self._late_logged_at
        if not force and last is not None and now - last < LATE_LOG_EVERY:
            return
        log.warning(
            "%s: %d late events (latest: %s); sent anyway: a worker already past their time "
            "dead-letters them. Raise GPUFRAG_WATCH__ALLOWED_DELAY_S (%.1f s) if this recurs.",
            self.name,
            self._late_since_log,
            self._late_example,
            self.reorder.delay.total_seconds(),
        )
        self._late_logged_at = now
        self._late_since_log = 0
