"""The dcgm-exporter scraper: polls each exporter and emits one event per GPU sample.

Each endpoint has its own loop, so one dead exporter never delays the others. A failed scrape
backs off exponentially with jitter (a node rebooting must not be hammered, and a fleet of
exporters restarted together must not be polled in lockstep); the next success resets it. A
failure is counted and logged, never raised: the scraper runs until ``stop`` is set. Nothing
failed is kept for later (a scrape is a snapshot, the next one supersedes it), so memory stays
flat however long an exporter is down.

What the scraper will not pass on goes to the process's ``RefusalLog`` (source ``dcgm``): each
refused line with the parser's reason, a page over ``max_body_bytes`` (``too_large``), and a
sample that could not be wrapped (``unexpected``). A refused line costs that line on every
scrape of the page, never the page's other GPUs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime

import aiohttp
from prometheus_client import CollectorRegistry

from connectors.backoff import Backoff
from connectors.dcgm.endpoints import Discovery, Endpoint
from connectors.dcgm.exposition import clip
from connectors.dcgm.samples import MIN_TIMESTAMP, TimedSample, parse_exposition
from connectors.dcgm.scrape_metrics import ErrorReason, ScrapeMetrics
from connectors.refusals import RefusalLog
from models import Envelope, GpuSampleEvent
from models.refusal import RAW_MAX_CHARS

__all__ = ["DcgmScraper"]

log = logging.getLogger(__name__)

_ACCEPT = "text/plain;version=0.0.4;q=1,*/*;q=0.1"


def _wall_clock() -> datetime:
    return datetime.now(UTC)


class _Failed(Exception):
    def __init__(self, reason: ErrorReason, detail: str, raw: bytes = b"") -> None:
        super().__init__(detail)
        self.reason: ErrorReason = reason
        self.raw = raw


async def _stopped(stop: asyncio.Event, delay_s: float) -> bool:
    """Sleep ``delay_s`` unless ``stop`` is set first; True when it was."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), delay_s)
    return stop.is_set()


class DcgmScraper:
    def __init__(
        self,
        *,
        endpoints: Sequence[Endpoint] = (),
        emit: Callable[[Envelope], Awaitable[None]],
        registry: CollectorRegistry,
        refusals: RefusalLog,
        interval_s: float = 15.0,
        timeout_s: float = 10.0,
        backoff_initial_s: float = 1.0,
        backoff_max_s: float = 60.0,
        max_body_bytes: int = 4 * 1024 * 1024,
        discovery: Discovery | None = None,
        discovery_interval_s: float = 60.0,
        source: str = "dcgm",
        min_timestamp: datetime = MIN_TIMESTAMP,
        now: Callable[[], datetime] = _wall_clock,
    ) -> None:
        """``now`` stamps each scrape (the event time of lines without their own timestamp):
        the wall clock, unless the pipeline runs on another clock. ``max_body_bytes`` bounds
        what one scrape may read: a misconfigured URL serving a huge file must not exhaust
        memory (a real exporter page is about 5 KB per GPU). ``min_timestamp``: line
        timestamps before it are refused (see ``parse_exposition``)."""
        if not endpoints and discovery is None:
            raise ValueError("give endpoints, a discovery, or both")
        for name, value in (
            ("interval_s", interval_s),
            ("timeout_s", timeout_s),
            ("backoff_initial_s", backoff_initial_s),
            ("discovery_interval_s", discovery_interval_s),
        ):
            if value <= 0:
                raise ValueError(f"{name} must be positive")
        if backoff_max_s < backoff_initial_s:
            raise ValueError("backoff_max_s must be at least backoff_initial_s")
        if max_body_bytes <= 0:
            raise ValueError("max_body_bytes must be positive")
        self.endpoints = tuple(endpoints)
        self.emit = emit
        self.metrics = ScrapeMetrics(registry)
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self.backoff_initial_s = backoff_initial_s
        self.backoff_max_s = backoff_max_s
        self.max_body_bytes = max_body_bytes
        self.discovery = discovery
        self.discovery_interval_s = discovery_interval_s
        self.source = source
        self.refusals = refusals
        self.min_timestamp = min_timestamp
        self.now = now
        self._jitter = random.Random()
        self._discovered: list[Endpoint] = []

    async def run(self, *, stop: asyncio.Event) -> None:
        """Scrape until ``stop`` is set; with a discovery, follow its endpoint set."""
        timeout = aiohttp.ClientTimeout(total=self.timeout_s)
        async with aiohttp.ClientSession(timeout=timeout, headers={"Accept": _ACCEPT}) as session:
            running: dict[Endpoint, asyncio.Task[None]] = {}
            try:
                while True:
                    wanted = await self._wanted()
                    for ep in [ep for ep in running if ep not in wanted]:
                        await self._retire(running.pop(ep))
                        if all(other.url != ep.url for other in wanted):
                            self.metrics.forget(ep.url)
                    for ep in wanted:
                        if ep not in running:
                            running[ep] = asyncio.create_task(
                                self._follow(session, ep, stop), name=f"dcgm-scrape {ep.url}"
                            )
                    if self.discovery is None:
                        await stop.wait()
                        return
                    if await _stopped(stop, self.discovery_interval_s):
                        return
            finally:
                for task in running.values():
                    task.cancel()
                await asyncio.gather(*running.values(), return_exceptions=True)

    @staticmethod
    async def _retire(task: asyncio.Task[None]) -> None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def _wanted(self) -> list[Endpoint]:
        """The static endpoints, then the discovered ones; one loop per URL (the first
        entry for a URL wins), since metrics are labelled by URL."""
        if self.discovery is not None:
            try:
                found = await asyncio.wait_for(
                    self.discovery.endpoints(), self.discovery_interval_s
                )
                self._discovered = list(found)
            except Exception as exc:  # a discovery outage (or hang) must not stop scraping
                self.metrics.discovery_errors.inc()
                log.warning("DCGM exporter discovery failed, keeping the last set: %r", exc)
        by_url: dict[str, Endpoint] = {}
        for ep in (*self.endpoints, *self._discovered):
            by_url.setdefault(ep.url, ep)
        return list(by_url.values())

    async def _follow(
        self, session: aiohttp.ClientSession, ep: Endpoint, stop: asyncio.Event
    ) -> None:
        loop = asyncio.get_running_loop()
        backoff = Backoff(
            initial_s=self.backoff_initial_s, max_s=self.backoff_max_s, rng=self._jitter
        )
        while not stop.is_set():
            started = loop.time()
            try:
                await self._scrape(session, ep)
            except Exception as exc:
                failed = exc if isinstance(exc, _Failed) else _Failed("internal", repr(exc))
                if not isinstance(exc, _Failed):  # our bug: costs this scrape, not the loop
                    log.exception("DCGM exporter %s: scrape failed", ep.url)
                if failed.reason == "too_large":
                    self.refusals.refuse(
                        source=self.source,
                        reason="too_large",
                        detail=f"{ep.url}: page {failed}",
                        raw=failed.raw,
                    )
                self.metrics.errors.labels(ep.url, failed.reason).inc()
                if backoff.failures == 0:
                    log.warning(
                        "DCGM exporter %s: %s (%s); backing off", ep.url, failed, failed.reason
                    )
                delay = backoff.next()
            else:
                if backoff.failures:
                    self.metrics.reconnects.labels(ep.url).inc()
                    log.info(
                        "DCGM exporter %s is back after %d failed scrapes", ep.url, backoff.failures
                    )
                backoff.reset()
                delay = max(0.0, self.interval_s - (loop.time() - started))
            self.metrics.failing.labels(ep.url).set(backoff.failures)
            if await _stopped(stop, delay):
                return

    async def _scrape(self, session: aiohttp.ClientSession, ep: Endpoint) -> None:
        """One scrape, its samples emitted and its refused lines refused; raises _Failed with
        the reason it did not work."""
        at = self.now()
        body = await self._fetch(session, ep.url)
        # About 20 us a line: a big node's page would hold the loop (and every other
        # exporter's scrape) for tens of milliseconds.
        result = await asyncio.to_thread(
            parse_exposition,
            body,
            scraped_at=at,
            default_node=ep.node,
            min_timestamp=self.min_timestamp,
        )
        for item in result.rejected:
            self.metrics.rejected.labels(ep.url, item.kind).inc()
            detail = f"{ep.url} {item}"
            self.refusals.refuse(source=self.source, reason=item.kind, detail=detail, raw=item.raw)
        if result.blanks:
            self.metrics.blanks.labels(ep.url).inc(result.blanks)
        if not result.samples and result.rejected:
            raise _Failed("no_samples", f"no GPU samples; {len(result.rejected)} lines refused")
        for timed in result.samples:
            env = self._wrap(ep, timed, body)
            if env is None:
                continue
            try:
                await self.emit(env)
            except Exception as exc:  # the consumer's failure: back off, as from a dead exporter
                raise _Failed("emit", f"emit failed: {exc!r}") from None
            self.metrics.emitted.labels(ep.url).inc()
        self.metrics.last_success.labels(ep.url).set(at.timestamp())

    def _wrap(self, ep: Endpoint, timed: TimedSample, body: bytes) -> Envelope | None:
        """The sample's envelope, or None with the sample refused: whatever goes wrong with one
        sample (an id that cannot be derived, a bound the parser missed) costs that sample,
        not the page's other GPUs."""
        try:
            return Envelope.wrap(
                GpuSampleEvent(sample=timed.sample), event_time=timed.at, source=self.source
            )
        except Exception as exc:
            lines = body.split(b"\n")
            raw = b"\n".join(lines[no - 1] for no in timed.lines if 0 < no <= len(lines))
            where = f"{ep.url} GPU {timed.sample.gpu_index} (lines {clip(str(timed.lines))})"
            self.refusals.refuse(
                source=self.source,
                reason="unexpected",
                detail=f"{where}: {type(exc).__name__}: {clip(str(exc), 200)}",
                raw=raw,
            )
            return None

    async def _fetch(self, session: aiohttp.ClientSession, url: str) -> bytes:
        try:
            async with session.get(url) as resp:
                if resp.status != 200:
                    raise _Failed("http_status", f"HTTP {resp.status}")
                cap = self.max_body_bytes
                if resp.content_length is not None and resp.content_length > cap:
                    why = f"of {resp.content_length} bytes (Content-Length) is over {cap} bytes"
                    raise _Failed("too_large", why)
                body = bytearray()
                async for chunk in resp.content.iter_chunked(64 * 1024):
                    body += chunk
                    if len(body) > cap:  # stops reading here: the rest is never held
                        why = f"is over {cap} bytes (stopped reading at {len(body)})"
                        raise _Failed("too_large", why, bytes(body[:RAW_MAX_CHARS]))
                return bytes(body)
        except TimeoutError:
            raise _Failed("timeout", f"no answer within {self.timeout_s} s") from None
        except aiohttp.ClientConnectionError as exc:
            raise _Failed("connect", str(exc) or type(exc).__name__) from None
        except aiohttp.ClientError as exc:
            raise _Failed("http", str(exc) or type(exc).__name__) from None
