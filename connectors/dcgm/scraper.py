"""The dcgm-exporter scraper: polls each exporter and emits one event per GPU sample.

Each endpoint has its own loop, so one dead exporter never delays the others. A failed scrape
backs off exponentially with jitter (a node rebooting must not be hammered, and a fleet of
exporters restarted together must not be polled in lockstep); the next success resets it. A
failure is counted and logged, never raised: the scraper runs until ``stop`` is set. Nothing
failed is kept for later (a scrape is a snapshot, the next one supersedes it), so memory stays
flat however long an exporter is down.
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
from connectors.dcgm.metrics import ErrorReason, ScrapeMetrics
from connectors.dcgm.samples import ParseResult, parse_exposition
from models import Envelope, GpuSampleEvent

__all__ = ["DcgmScraper"]

log = logging.getLogger(__name__)

_ACCEPT = "text/plain;version=0.0.4;q=1,*/*;q=0.1"


def _wall_clock() -> datetime:
    return datetime.now(UTC)


class _Failed(Exception):
    def __init__(self, reason: ErrorReason, detail: str) -> None:
        super().__init__(detail)
        self.reason: ErrorReason = reason


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
        interval_s: float = 15.0,
        timeout_s: float = 10.0,
        backoff_initial_s: float = 1.0,
        backoff_max_s: float = 60.0,
        max_body_bytes: int = 16 * 1024 * 1024,
        discovery: Discovery | None = None,
        discovery_interval_s: float = 60.0,
        source: str = "dcgm",
        now: Callable[[], datetime] = _wall_clock,
    ) -> None:
        """``now`` stamps each scrape (the event time of lines without their own timestamp):
        the wall clock, unless the pipeline runs on another clock. ``max_body_bytes`` bounds
        what one scrape may read: a misconfigured URL serving a huge file must not exhaust
        memory (a real exporter page is tens of KiB per GPU)."""
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
        rejected_before = 0
        while not stop.is_set():
            started = loop.time()
            try:
                result = await self._scrape(session, ep)
            except Exception as exc:
                failed = exc if isinstance(exc, _Failed) else _Failed("internal", repr(exc))
                if not isinstance(exc, _Failed):  # our bug: costs this scrape, not the loop
                    log.exception("DCGM exporter %s: scrape failed", ep.url)
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
                if len(result.rejected) != rejected_before and result.rejected:
                    log.warning(
                        "DCGM exporter %s: %d lines refused, first %s",
                        ep.url,
                        len(result.rejected),
                        result.rejected[0],
                    )
                rejected_before = len(result.rejected)
                delay = max(0.0, self.interval_s - (loop.time() - started))
            self.metrics.failing.labels(ep.url).set(backoff.failures)
            if await _stopped(stop, delay):
                return

    async def _scrape(self, session: aiohttp.ClientSession, ep: Endpoint) -> ParseResult:
        """One scrape, its samples emitted; raises _Failed with the reason it did not work."""
        at = self.now()
        body = await self._fetch(session, ep.url)
        # About 20 us a line: a big node's page would hold the loop (and every other
        # exporter's scrape) for tens of milliseconds.
        result = await asyncio.to_thread(
            parse_exposition, body, scraped_at=at, default_node=ep.node
        )
        for item in result.rejected:
            self.metrics.rejected.labels(ep.url, item.kind).inc()
        if result.blanks:
            self.metrics.blanks.labels(ep.url).inc(result.blanks)
        if not result.samples and result.rejected:
            raise _Failed("no_samples", f"no GPU samples; {len(result.rejected)} lines refused")
        for timed in result.samples:
            env = Envelope.wrap(
                GpuSampleEvent(sample=timed.sample), event_time=timed.at, source=self.source
            )
            try:
                await self.emit(env)
            except Exception as exc:  # the consumer's failure: back off, as from a dead exporter
                raise _Failed("emit", f"emit failed: {exc!r}") from None
            self.metrics.emitted.labels(ep.url).inc()
        self.metrics.last_success.labels(ep.url).set(at.timestamp())
        return result

    async def _fetch(self, session: aiohttp.ClientSession, url: str) -> bytes:
        try:
            async with session.get(url) as resp:
                if resp.status != 200:
                    raise _Failed("http_status", f"HTTP {resp.status}")
                if resp.content_length is not None and resp.content_length > self.max_body_bytes:
                    raise _Failed("too_large", f"{resp.content_length} bytes")
                body = bytearray()
                async for chunk in resp.content.iter_chunked(64 * 1024):
                    body += chunk
                    if len(body) > self.max_body_bytes:
                        raise _Failed("too_large", f"over {self.max_body_bytes} bytes")
                return bytes(body)
        except TimeoutError:
            raise _Failed("timeout", f"no answer within {self.timeout_s} s") from None
        except aiohttp.ClientConnectionError as exc:
            raise _Failed("connect", str(exc) or type(exc).__name__) from None
        except aiohttp.ClientError as exc:
            raise _Failed("http", str(exc) or type(exc).__name__) from None
