"""The embedded runner: the pipeline's operators on bounded asyncio queues in one process.

source -> [queue] -> join -> [queue] -> cluster operator, one event-time instant at a time -> output

Every output of either operator goes to the output (the history store keeps them all); the
runner does not look inside them.

Queues are bounded, so a slow output slows the source instead of growing memory. A stage that
fails on one event counts the error, hands the event to the output's dead-letter path with the
reason, and goes on. Stopping (``stop()``, e.g. on SIGINT) ends the source; everything already
taken from it flows through every stage and the output before ``run`` returns.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge

from models import Action, Envelope, Signal
from models.actuation import ActionRequest
from models.analysis import InstantReport
from streams.instants import Instants
from streams.pipeline import InstantOutput, Pipeline
from streams.profiles.join import ProfileUpdate

QUEUE_SIZE = 2048
log = logging.getLogger(__name__)


@dataclass(slots=True)
class Emission:
    """What one input event produced (its profile changes, and the signals of late input),
    or, with ``env`` None, what the instants released up to ``at`` produced; each kind of
    output in a channel of its own type."""

    at: datetime
    env: Envelope | None
    deltas: list[ProfileUpdate] = field(default_factory=list)
    """The join's profile changes for ``env``."""
    late: list[Signal] = field(default_factory=list)
    """Signals of input that came after its instant was evaluated (applied on arrival)."""
    instants: list[InstantOutput] = field(default_factory=list)

    def signals(self) -> Iterator[Signal]:
        yield from self.late
        for instant in self.instants:
            yield from instant.signals

    def actions(self) -> Iterator[Action]:
        for instant in self.instants:
            yield from instant.actions

    def requests(self) -> Iterator[ActionRequest]:
        for instant in self.instants:
            yield from instant.requests

    def reports(self) -> Iterator[InstantReport]:
        for instant in self.instants:
            if instant.report is not None:
                yield instant.report


@dataclass(slots=True)
class Failure:
    env: Envelope
    stage: str
    reason: str


class Output(Protocol):
    """Where emissions go (the history store, a test's list)."""

    async def emit(self, item: Emission) -> None: ...

    async def dead_letter(self, failure: Failure) -> None: ...


class StageMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.events_in = Counter(
            "gpufrag_stage_events_in_total", "Items taken by a stage", ["stage"], registry=registry
        )
        self.events_out = Counter(
            "gpufrag_stage_events_out_total",
            "Items a stage passed on",
            ["stage"],
            registry=registry,
        )
        self.errors = Counter(
            "gpufrag_stage_errors_total", "Items a stage failed on", ["stage"], registry=registry
        )
        self.queue_items = Gauge(
            "gpufrag_stage_queue_items", "Items waiting in a queue", ["queue"], registry=registry
        )
        self.watermark = Gauge(
            "gpufrag_stage_watermark_seconds",
            "Latest event time a stage has seen (POSIX s)",
            ["stage"],
            registry=registry,
        )
        self.lag = Gauge(
            "gpufrag_stage_lag_seconds",
            "How far a stage is behind the source, in event time",
            ["stage"],
            registry=registry,
        )
        self.disagreements = Counter(
            "gpufrag_explanation_disagreements",
            "kube-scheduler verdicts that disagreed with gpufrag's explanation of a pending "
            "pod, by the scheduler's reason",
            ["reason"],
            registry=registry,
        )
        self._disagreed: dict[str, int] = {}
        self._source_watermark = 0.0
        self._stages: dict[str, StageChildren] = {}

    def disagreed(self, totals: Mapping[str, int]) -> None:
        """Bring the counter up to the cluster operator's own count (it counts, the runner
        only shows; a reason's count never goes down while one operator lives)."""
        for reason, n in totals.items():
            if n > self._disagreed.get(reason, 0):
                self.disagreements.labels(reason).inc(n - self._disagreed.get(reason, 0))
                self._disagreed[reason] = n

    def stage(self, name: str) -> StageChildren:
        """One stage's metric children, looked up once: ``labels()`` per event was 1.3 s of a
        26 s replay under the profiler (330,000 calls for 25,330 events)."""
        bound = self._stages.get(name)
        if bound is None:
            bound = self._stages[name] = StageChildren(self, name)
        return bound

    def source_saw(self, event_time_s: float) -> None:
        self._source_watermark = max(self._source_watermark, event_time_s)

    @property
    def source_watermark_s(self) -> float:
        """The latest event time the source has passed on: what the stages' lag counts from."""
        return self._source_watermark


class StageChildren:
    """A stage's counters and gauges, bound to its label (``StageMetrics.stage``)."""

    __slots__ = ("errors", "events_in", "events_out", "lag", "metrics", "name", "watermark")

    def __init__(self, metrics: StageMetrics, name: str) -> None:
        self.metrics = metrics
        self.name = name
        self.events_in = metrics.events_in.labels(name)
        self.events_out = metrics.events_out.labels(name)
        self.errors = metrics.errors.labels(name)
        self.watermark = metrics.watermark.labels(name)
        self.lag = None if name == "source" else metrics.lag.labels(name)

    def saw(self, event_time_s: float) -> None:
        self.watermark.set(event_time_s)
        if self.lag is None:
            self.metrics.source_saw(event_time_s)
        else:
            self.lag.set(max(0.0, self.metrics.source_watermark_s - event_time_s))


_END = object()


class EmbeddedRunner:
    def __init__(
        self,
        *,
        source: Iterator[Envelope] | AsyncIterator[Envelope],
        output: Output,
        pipeline: Pipeline,
        registry: CollectorRegistry | None = None,
        pace: Callable[[datetime], float] | None = None,
        on_progress: Callable[[int, datetime], None] | None = None,
    ) -> None:
        """``source`` is a sync iterator (a replay) or an async one (live sources, already in
        event-time order); ``pace`` maps an event time to wall seconds to wait before it (replay
        speed); ``on_progress`` is called with the count and time of each event the analysis
        finished."""
        self.source = source
        self.output = output
        self.pipeline = pipeline
        self.registry = registry or CollectorRegistry()
        self.metrics = StageMetrics(self.registry)
        self.pace = pace
        self.on_progress = on_progress
        self.processed = 0
        self.failures = 0
        self.interrupted = False
        self._stop = asyncio.Event()

    def stop(self) -> None:
        """Stop taking new events; what was taken still flows through."""
        self.interrupted = True
        self._stop.set()

    async def run(self) -> None:
        q1: asyncio.Queue[object] = asyncio.Queue(QUEUE_SIZE)
        q2: asyncio.Queue[object] = asyncio.Queue(QUEUE_SIZE)
        tasks = [
            asyncio.create_task(self._source(q1), name="source"),
            asyncio.create_task(self._join(q1, q2), name="join"),
            asyncio.create_task(self._analyse(q2), name="analysis"),
        ]
        try:
            await asyncio.gather(*tasks)
        finally:
            for t in tasks:
                t.cancel()

    async def _source(self, out: asyncio.Queue[object]) -> None:
        m = self.metrics.stage("source")
        waiting = self.metrics.queue_items.labels("source->join")
        n = 0
        try:
            it = self.source if isinstance(self.source, AsyncIterator) else iter(self.source)
            while not self._stop.is_set():  # checked before taking an event, so none is dropped
                env = await self._next(it)
                if env is None:
                    break
                if env.seq is None:  # the input's order breaks ties within an instant
                    env = env.model_copy(update={"seq": n})
                if self.pace is not None and await self._stopped_within(self.pace(env.event_time)):
                    break
                m.events_in.inc()
                m.saw(env.event_time.timestamp())
                await out.put(env)
                m.events_out.inc()
                waiting.set(out.qsize())
                n += 1
                if n % 256 == 0:
                    await asyncio.sleep(0)  # let the stages run between bursts
        finally:
            await out.put(_END)

    async def _next(self, it: Iterator[Envelope] | AsyncIterator[Envelope]) -> Envelope | None:
        """The source's next event, None at its end. A live source can be quiet for long, so
        stop() does not wait for its next event (one taken meanwhile is still passed on)."""
        if not isinstance(it, AsyncIterator):
            return next(it, None)
        taking = asyncio.ensure_future(anext(it, None))
        stopping = asyncio.ensure_future(self._stop.wait())
        try:
            await asyncio.wait((taking, stopping), return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()
            if not taking.done():
                taking.cancel()
        return taking.result() if taking.done() and not taking.cancelled() else None

    async def _stopped_within(self, wait_s: float) -> bool:
        """Wait up to ``wait_s`` (replay pacing); True when stop() came meanwhile."""
        if wait_s <= 0:
            return False
        try:
            await asyncio.wait_for(self._stop.wait(), timeout=wait_s)
        except TimeoutError:
            return False
        return True

    async def _join(self, inq: asyncio.Queue[object], out: asyncio.Queue[object]) -> None:
        m = self.metrics.stage("join")
        waiting = self.metrics.queue_items.labels("join->analysis")
        while True:
            item = await inq.get()
            if item is _END:
                await out.put(_END)
                return
            assert isinstance(item, Envelope)
            m.events_in.inc()
            m.saw(item.event_time.timestamp())
            try:
                updates = self.pipeline.join.apply(item)
            except Exception as exc:  # one bad event must not stop the pipeline
                m.errors.inc()
                self.failures += 1
                await self.output.dead_letter(Failure(item, "join", f"{type(exc).__name__}: {exc}"))
                continue
            await out.put(Emission(at=item.event_time, env=item, deltas=list(updates)))
            m.events_out.inc()
            waiting.set(out.qsize())

    async def _analyse(self, inq: asyncio.Queue[object]) -> None:
        m = self.metrics.stage("analysis")
        p = self.pipeline
        instants: Instants[ProfileUpdate, Signal] = Instants(p.cluster)
        last_time: datetime | None = None
        while True:
            item = await inq.get()
            if item is _END:
                break
            assert isinstance(item, Emission) and item.env is not None
            m.events_in.inc()
            at = item.at
            m.saw(at.timestamp())
            if last_time is not None and at > last_time:
                # the input is in event-time order: the previous instant is complete
                await self._release(instants, last_time)
            try:
                late: list[Signal] = []
                for key, update in p.ordered(item.env, item.deltas):
                    late += instants.add(key, update)
                item.late += late
            except Exception as exc:  # the operator's state stays as it was before this event
                m.errors.inc()
                self.failures += 1
                await self.output.dead_letter(
                    Failure(item.env, "analysis", f"{type(exc).__name__}: {exc}")
                )
                continue
            if last_time is None or at > last_time:
                last_time = at
            await self.output.emit(item)
            self.metrics.disagreed(p.cluster.disagreements)
            m.events_out.inc()
            self.processed += 1
            if self.on_progress is not None:
                self.on_progress(self.processed, at)
        if last_time is not None:
            # what was taken is evaluated, interrupted or not
            await self._release(instants, last_time)
        if not self.interrupted:
            # the end of the input: what is outstanding, as a last event would bring it
            final = p.flush()
            if final is not None:
                await self.output.emit(Emission(at=final.at, env=None, instants=[final]))
        elif last_time is not None:
            await self.output.emit(
                Emission(at=last_time, env=None, instants=[p.state_at(last_time)])
            )
        self.metrics.disagreed(p.cluster.disagreements)

    async def _release(self, instants: Instants[ProfileUpdate, Signal], upto: datetime) -> None:
        """Apply and evaluate every instant up to ``upto``; what it produced is one emission."""
        outputs: list[InstantOutput] = []

        def on_instant(at: datetime, signals: list[Signal]) -> None:
            outputs.append(self.pipeline.instant(at, signals))

        try:
            instants.release(upto, on_instant=on_instant)
        except Exception as exc:  # counted, reported, and the run goes on
            self.metrics.stage("analysis").errors.inc()
            self.failures += 1
            log.exception("evaluating the instant %s failed: %s", upto.isoformat(), exc)
        if outputs:
            await self.output.emit(Emission(at=upto, env=None, instants=outputs))
