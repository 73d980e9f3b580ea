"""One sink's queue: what it has yet to accept, what is open there (to send again), and the
loop that posts, backs off, and gives up on an alert with a dead letter.

Wall-clock timers are fine here: this is I/O at the edge, and event time (a replay's 2023
timestamps) says nothing about when a receiver was last told.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from connectors.alerts.alert import Alert
from connectors.alerts.alert_metrics import AlertMetrics
from connectors.alerts.sink_registry import AlertSink, SinkError
from connectors.backoff import Backoff
from models.settings import AlertSettings

__all__ = ["Lane", "LaneClock"]

log = logging.getLogger(__name__)

Keep = Callable[[str, Alert, str, str, datetime], Awaitable[None]]
"""(sink name, alert, reason, detail, when) -> the dead letter is written, or it raises."""


@dataclass(frozen=True, slots=True)
class LaneClock:
    monotonic: Callable[[], float]
    wall: Callable[[], datetime]


class Lane:
    def __init__(
        self,
        sink: AlertSink,
        *,
        settings: AlertSettings,
        dead_letter: Keep,
        metrics: AlertMetrics,
        clock: LaneClock,
        rng: random.Random,
    ) -> None:
        self.sink = sink
        self.settings = settings
        self._keep = dead_letter
        self._metrics = metrics
        self._clock = clock
        self.pending: dict[str, Alert] = {}
        """Fingerprint -> the latest state this sink has not accepted yet."""
        self._waiting_since: dict[str, float] = {}
        self.open: dict[str, Alert] = {}
        """Open alerts to post again every resend interval (only for a sink that resends)."""
        self._sent_at: dict[str, float] = {}
        self._wake = asyncio.Event()
        self.idle = asyncio.Event()
        self.idle.set()
        self._backoff = Backoff(
            initial_s=settings.retry_initial_s, max_s=settings.retry_max_s, rng=rng
        )
        self.last_error: SinkError | None = None
        self.counts = {"sent": 0, "dead_lettered": 0}
        """Alert states that left this lane, by how: the sink accepted them, or they were
        kept as dead letters. Re-sends of an open alert and states replaced while unsent are
        not counted, so with one sink these add up to the news the dispatcher took."""

    def put(self, alert: Alert) -> None:
        fp = alert.fingerprint
        self.pending[fp] = alert  # an unsent older state of the same signal is news no more
        # the wait is the signal's, so a newer state does not restart the give-up clock
        self._waiting_since.setdefault(fp, self._clock.monotonic())
        if self.sink.resends:
            if alert.resolved:
                self.open.pop(fp, None)
                self._sent_at.pop(fp, None)
            else:
                self.open[fp] = alert
        self._changed()
        self._wake.set()

    def _changed(self) -> None:
        if self.pending:
            self.idle.clear()
        else:
            self.idle.set()
        self._metrics.pending.labels(self.sink.name).set(len(self.pending))

    # --- the loop -----------------------------------------------------------------------------

    async def run(self) -> None:
        while True:
            batch = self._batch()
            if not batch:
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self._next_resend_in())
                continue
            try:
                await self._send(batch)
            except SinkError as exc:
                self._failed(exc)
                if exc.retriable:
                    await self._retry_later(batch, exc)
                else:
                    await self._post_each(batch, exc)
                    if any(self.pending.get(a.fingerprint) is a for a in batch):
                        # a dead letter could not be written: wait, not a hot loop
                        await asyncio.sleep(self._backoff.next())
                continue
            self._accepted(batch)

    async def _send(self, batch: Sequence[Alert]) -> None:
        """One delivery, bounded by ``timeout_s`` whatever the sink does; any failure a
        ``SinkError``, so a sink's own bug is retried and dead-lettered like an outage instead
        of ending this loop with its alerts unsent."""
        try:
            async with asyncio.timeout(self.settings.timeout_s):
                await self.sink.send(batch, now=self._clock.wall())
        except SinkError:
            raise
        except TimeoutError:
            raise SinkError("timeout", "no answer within the timeout", retriable=True) from None
        except Exception as exc:
            detail = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
            raise SinkError("error", detail, retriable=True) from None

    def _batch(self) -> list[Alert]:
        """Pending alerts first, then open ones due to be sent again."""
        batch = list(self.pending.values())[: self.sink.max_batch]
        if not self.sink.resends or len(batch) >= self.sink.max_batch:
            return batch
        now = self._clock.monotonic()
        interval = self.settings.resend_interval_s
        for fp, alert in self.open.items():
            if fp not in self.pending and now - self._sent_at.get(fp, -interval) >= interval:
                batch.append(alert)
                if len(batch) >= self.sink.max_batch:
                    break
        return batch

    def _next_resend_in(self) -> float | None:
        if not self.open:
            return None
        now = self._clock.monotonic()
        last = min(self._sent_at.get(fp, now) for fp in self.open)
        return max(0.01, last + self.settings.resend_interval_s - now)

    def _accepted(self, batch: list[Alert]) -> None:
        now = self._clock.monotonic()
        for alert in batch:
            fp = alert.fingerprint
            if self.pending.get(fp) is alert:  # not replaced by a newer state meanwhile
                del self.pending[fp]
                self._waiting_since.pop(fp, None)
                self.counts["sent"] += 1
            if self.open.get(fp) is alert:
                self._sent_at[fp] = now
        if self.last_error is not None:
            log.warning("alert sink %s accepts alerts again", self.sink.name)
            self.last_error = None
        self._backoff.reset()
        self._metrics.sent.labels(self.sink.name).inc(len(batch))
        self._changed()

    def _failed(self, exc: SinkError) -> None:
        self._metrics.failed.labels(self.sink.name, exc.reason).inc()
        if self.last_error is None:  # one line per outage, not per retry
            log.warning("alert sink %s failed (%s); retrying", self.sink.name, exc.detail)
        self.last_error = exc

    async def _retry_later(self, batch: list[Alert], exc: SinkError) -> None:
        now = self._clock.monotonic()
        limit = self.settings.give_up_after_s
        for alert in batch:
            since = self._waiting_since.get(alert.fingerprint)
            mine = self.pending.get(alert.fingerprint) is alert
            if mine and since is not None and now - since >= limit:
                detail = f"not accepted in {limit:g} s; last error: {exc.detail}"
                await self._give_up(alert, "sink_down", detail)
        await asyncio.sleep(self._backoff.next())

    async def _post_each(self, batch: list[Alert], exc: SinkError) -> None:
        """A refused batch, one alert at a time: the receiver refuses a whole list for one bad
        alert, and the others must not share its dead letter."""
        if len(batch) == 1:
            await self._give_up(batch[0], "rejected", exc.detail, reopen=True)
            return
        for alert in batch:
            try:
                await self._send([alert])
            except SinkError as one:
                self._failed(one)
                if not one.retriable:
                    await self._give_up(alert, "rejected", one.detail, reopen=True)
                continue  # a retriable failure: left where it was, for the loop
            self._accepted([alert])

    async def _give_up(
        self, alert: Alert, reason: str, detail: str, *, reopen: bool = False
    ) -> None:
        """Dead-letter ``alert`` and let it go; if the dead letter cannot be written, it stays
        (to be sent or dead-lettered later). ``reopen``: also stop re-sending it, since the
        receiver refuses it as such."""
        fp = alert.fingerprint
        try:
            await self._keep(self.sink.name, alert, reason, detail, self._clock.wall())
        except Exception:
            log.exception("alert for %s to %s could not be dead-lettered; kept", fp, self.sink.name)
            return
        self._metrics.dead_lettered.labels(self.sink.name, reason).inc()
        if self.pending.get(fp) is alert:
            del self.pending[fp]
            self._waiting_since.pop(fp, None)
            self.counts["dead_lettered"] += 1
        if reopen and self.open.get(fp) is alert:
            del self.open[fp]
            self._sent_at.pop(fp, None)
        self._changed()

    async def give_up_all(self, reason: str, detail: str) -> None:
        """Dead-letter everything still pending (the process is stopping)."""
        last = f"; last error: {self.last_error.detail}" if self.last_error else ""
        for alert in list(self.pending.values()):
            await self._give_up(alert, reason, detail + last)
