"""Where every edge sends what it refuses: counted, logged once in a while, and dead-lettered.

One log line per (source, reason) per ``log_every_s``: a cluster with one bad pod re-lists it
every few minutes, and a DCGM page with one bad line is scraped every second, so logging each
refusal would bury everything else; the counter keeps the full count.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime

from prometheus_client import CollectorRegistry, Counter

from models.refusal import Refusal

__all__ = ["DETAIL_MAX_CHARS", "RefusalLog", "RefusalSink"]

log = logging.getLogger(__name__)

DETAIL_MAX_CHARS = 1_000
"""A detail names the object and the field; 1,000 characters hold that with room."""

RefusalSink = Callable[[Refusal], None]
"""Takes a refusal without blocking (a queue put, a list append): edges call it mid-parse."""


class RefusalLog:
    """One per process; every source holds it and calls ``refuse``."""

    def __init__(
        self,
        *,
        registry: CollectorRegistry | None = None,
        sink: RefusalSink | None = None,
        log_every_s: float | None = 60.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._counter = Counter(
            "gpufrag_refused_total",
            "Inputs an edge refused (kept as dead letters where a store or topic is there)",
            ["source", "reason"],
            registry=registry,
        )
        self._sink = sink
        self._log_every_s = log_every_s
        self._monotonic = monotonic
        self._last_logged: dict[tuple[str, str], float] = {}
        self._unlogged: dict[tuple[str, str], int] = {}
        self.counts: dict[tuple[str, str], int] = {}
        self.last: Refusal | None = None

    def attach(self, sink: RefusalSink) -> None:
        """Set where refusals go once the store or topic is open (sources are built first)."""
        self._sink = sink

    def refuse(self, *, source: str, reason: str, detail: str, raw: str | bytes) -> Refusal:
        """Count, maybe log, and forward one refusal; never raises, so an edge can call it
        from its own error handler."""
        text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
        # one line (exception texts often span several) and short: a 5,000-digit quantity
        # belongs in the raw form, not in every log line and metric-sized reason
        detail = " ".join(detail.split())
        if len(detail) > DETAIL_MAX_CHARS:
            detail = detail[:DETAIL_MAX_CHARS] + "..."
        refusal = Refusal(
            source=source or "unknown",
            reason=reason[:64] or "unknown",
            detail=detail,
            raw=Refusal.cut(text),
            at=datetime.now(UTC),
        )
        key = (source, refusal.reason)
        self.counts[key] = self.counts.get(key, 0) + 1
        self.last = refusal
        self._counter.labels(source, refusal.reason).inc()
        self._maybe_log(key, detail)
        if self._sink is not None:
            try:
                self._sink(refusal)
            except Exception:  # the count and the log stand even if the dead letter cannot
                log.exception("%s: could not keep a refused input as a dead letter", source)
        return refusal

    def total(self, source: str | None = None) -> int:
        return sum(n for (s, _), n in self.counts.items() if source is None or s == source)

    def _maybe_log(self, key: tuple[str, str], detail: str) -> None:
        if self._log_every_s is None:  # the caller reports the refusals itself
            return
        now = self._monotonic()
        last = self._last_logged.get(key)
        if last is not None and now - last < self._log_every_s:
            self._unlogged[key] = self._unlogged.get(key, 0) + 1
            return
        self._last_logged[key] = now
        since = self._unlogged.pop(key, 0)
        more = f" ({since} more since the last line)" if since else ""
        log.warning("%s refused an input (%s): %s%s", key[0], key[1], detail, more)
