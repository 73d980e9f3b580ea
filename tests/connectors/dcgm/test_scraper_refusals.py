"""The scraper over real HTTP: what it refuses costs that line, that sample or that scrape, and
is counted in ``gpufrag_refused_total``; the page's valid GPUs come through on every scrape."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

import pytest
from aiohttp import web
from prometheus_client import CollectorRegistry

from connectors.dcgm import Endpoint
from connectors.dcgm.scraper import DcgmScraper
from connectors.refusals import RefusalLog
from models import Envelope, GpuSampleEvent
from models.refusal import Refusal
from tests.connectors.dcgm.exporter_server import FakeExporter
from tests.connectors.dcgm.helpers import page
from tests.connectors.dcgm.scraping import Sink, metric, running, until
from tests.ports import free_port

CLOCK = datetime(2026, 3, 2, 9, 30, tzinfo=UTC)
BIG = 2**70
HOST = 'UUID="GPU-bad",modelName="NVIDIA H200",Hostname="gpu-h200-07"'
# Listed before every valid GPU: one such line used to fail every scrape of the page.
OUT_OF_RANGE = (
    f'DCGM_FI_DEV_FB_USED{{gpu="{BIG}",{HOST}}} 1\n'
    f'DCGM_FI_DEV_FB_USED{{gpu="0",GPU_I_ID="{BIG}",{HOST}}} 1\n'
).encode()


def make(
    url: str,
    emit: Callable[[Envelope], Awaitable[None]],
    reg: CollectorRegistry,
    refusals: RefusalLog,
    *,
    max_body_bytes: int = 16 * 1024 * 1024,
) -> DcgmScraper:
    return DcgmScraper(
        endpoints=[Endpoint(url)],
        emit=emit,
        registry=reg,
        refusals=refusals,
        interval_s=0.02,
        timeout_s=5.0,
        backoff_initial_s=0.02,
        backoff_max_s=0.08,
        max_body_bytes=max_body_bytes,
        now=lambda: CLOCK,
    )


def refused_total(reg: CollectorRegistry, reason: str) -> float:
    return reg.get_sample_value("gpufrag_refused_total", {"source": "dcgm", "reason": reason}) or 0


async def test_an_out_of_range_line_never_costs_the_other_gpus_of_its_page() -> None:
    exporter = FakeExporter(OUT_OF_RANGE + page("plain_h200.txt"))
    reg = CollectorRegistry()
    emitted: list[tuple[int, int]] = []  # (scrape, GPU index)
    refused: list[tuple[int, Refusal]] = []  # (scrape, refusal)
    refusals = RefusalLog(registry=reg, sink=lambda r: refused.append((exporter.hits, r)))

    async def emit(env: Envelope) -> None:
        assert isinstance(env.payload, GpuSampleEvent)
        emitted.append((exporter.hits, env.payload.sample.gpu_index))

    def whole_scrapes() -> list[int]:
        # one scrape at a time per exporter, so the server's hit count names the scrape
        gpus: dict[int, set[int]] = {}
        for scrape, gpu in emitted:
            gpus.setdefault(scrape, set()).add(gpu)
        return sorted(s for s, found in gpus.items() if found == {0, 1})

    await exporter.start()
    try:
        async with running(make(exporter.url, emit, reg, refusals)):
            await until(lambda: len(whole_scrapes()) >= 3, within_s=30)
    finally:
        await exporter.stop()
    scrapes = whole_scrapes()
    seen = sorted({s for s, _ in emitted})
    assert scrapes in (seen, seen[:-1])  # no scrape lost a GPU (the last may have been cut)
    for scrape in scrapes:
        mine = [r for s, r in refused if s == scrape]
        assert [r.reason for r in mine] == ["out_of_range", "out_of_range"]
        assert "gpu_index" in mine[0].detail and "mig_instance" in mine[1].detail
        assert exporter.url in mine[0].detail
        assert mine[0].raw == OUT_OF_RANGE.decode().splitlines()[0]
    assert refused_total(reg, "out_of_range") >= 2 * len(scrapes)
    assert metric(reg, "gpufrag_dcgm_rejected_lines_total", exporter.url, kind="out_of_range") >= 6
    assert metric(reg, "gpufrag_dcgm_scrape_errors_total", exporter.url, reason="internal") == 0
    assert metric(reg, "gpufrag_dcgm_scrape_errors_total", exporter.url, reason="emit") == 0


class EndlessExporter:
    """Serves a body that never ends (chunked, no Content-Length) until told to serve a page:
    the cap must hold while reading, not after."""

    def __init__(self, body: bytes) -> None:
        self.body = body
        self.endless = True
        self.served = 0
        self.port = free_port()
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/metrics"

    async def _metrics(self, request: web.Request) -> web.StreamResponse:
        if not self.endless:
            return web.Response(body=self.body, content_type="text/plain")
        resp = web.StreamResponse()
        resp.content_type = "text/plain"
        await resp.prepare(request)
        chunk = b"# HELP filler a comment line, as a misrouted URL might serve\n" * 1024
        try:
            while True:
                await resp.write(chunk)
                self.served += len(chunk)
        except Exception:  # the scraper hung up: what the test wants
            pass
        return resp

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


async def test_a_page_over_the_cap_is_refused_while_reading_and_the_next_scrape_goes_on() -> None:
    exporter = EndlessExporter(page("plain_h200.txt"))
    reg, sink = CollectorRegistry(), Sink()
    refusals = RefusalLog(registry=reg)
    cap = 256 * 1024
    await exporter.start()
    try:
        async with running(make(exporter.url, sink, reg, refusals, max_body_bytes=cap)):
            await until(lambda: refused_total(reg, "too_large") >= 2, within_s=30)
            assert sink.envs == []
            # an endless body ends the scrape at the cap, never by the 5 s timeout
            assert (
                metric(reg, "gpufrag_dcgm_scrape_errors_total", exporter.url, reason="timeout") == 0
            )
            last = refusals.last
            assert last is not None and last.reason == "too_large"
            assert f"is over {cap} bytes" in last.detail and exporter.url in last.detail
            assert last.raw.startswith("# HELP filler")
            exporter.endless = False
            await until(lambda: len(sink.envs) >= 2, within_s=30)
    finally:
        await exporter.stop()
    assert metric(reg, "gpufrag_dcgm_scrape_errors_total", exporter.url, reason="too_large") >= 2


async def test_a_declared_length_over_the_cap_is_refused_before_reading() -> None:
    exporter = FakeExporter(page("plain_h200.txt"))
    reg, sink = CollectorRegistry(), Sink()
    refusals = RefusalLog(registry=reg)
    await exporter.start()
    try:
        async with running(make(exporter.url, sink, reg, refusals, max_body_bytes=4096)):
            await until(lambda: refused_total(reg, "too_large") >= 1, within_s=30)
    finally:
        await exporter.stop()
    assert (
        refusals.last is not None and "(Content-Length) is over 4096 bytes" in refusals.last.detail
    )
    assert sink.envs == []


async def test_seconds_timestamps_are_refused_with_the_hint() -> None:
    sent = int(CLOCK.timestamp())
    body = f'DCGM_FI_DEV_FB_USED{{gpu="0",{HOST}}} 1 {sent}\n'.encode()
    exporter = FakeExporter(body)
    reg, sink = CollectorRegistry(), Sink()
    refusals = RefusalLog(registry=reg)
    await exporter.start()
    try:
        async with running(make(exporter.url, sink, reg, refusals)):
            await until(lambda: refused_total(reg, "implausible_time") >= 1, within_s=30)
            await until(
                lambda: (
                    metric(
                        reg, "gpufrag_dcgm_scrape_errors_total", exporter.url, reason="no_samples"
                    )
                    >= 1
                )
            )
    finally:
        await exporter.stop()
    assert refusals.last is not None and "probably sent seconds" in refusals.last.detail
    assert sink.envs == []


async def test_a_sample_that_cannot_be_wrapped_costs_that_sample(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = Envelope.wrap

    def flaky(payload, **kwargs):  # type: ignore[no-untyped-def]
        if isinstance(payload, GpuSampleEvent) and payload.sample.gpu_index == 0:
            raise OverflowError("an id that cannot be derived")
        return real(payload, **kwargs)

    monkeypatch.setattr(Envelope, "wrap", flaky)
    exporter = FakeExporter(page("plain_h200.txt"))
    reg, sink = CollectorRegistry(), Sink()
    refusals = RefusalLog(registry=reg)
    await exporter.start()
    try:
        async with running(make(exporter.url, sink, reg, refusals)):
            await until(lambda: len(sink.envs) >= 3, within_s=30)
    finally:
        await exporter.stop()
    gpus = {e.payload.sample.gpu_index for e in sink.envs if isinstance(e.payload, GpuSampleEvent)}
    assert gpus == {1}
    last = refusals.last
    assert last is not None and last.reason == "unexpected"
    assert "GPU 0" in last.detail and "OverflowError" in last.detail
    assert 'gpu="0"' in last.raw and 'gpu="1"' not in last.raw
    assert metric(reg, "gpufrag_dcgm_scrape_errors_total", exporter.url, reason="internal") == 0
