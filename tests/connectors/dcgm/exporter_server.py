"""A stand-in dcgm-exporter: a real aiohttp server on 127.0.0.1 serving a fixture page, which a
test can stop, restart on the same port, or switch to other answers."""

from __future__ import annotations

from aiohttp import web

from tests.ports import free_port


class FakeExporter:
    def __init__(self, body: bytes, *, port: int | None = None) -> None:
        self.body = body
        self.status = 200
        self.port = port if port is not None else free_port()
        self.hits = 0
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/metrics"

    async def _metrics(self, request: web.Request) -> web.Response:
        self.hits += 1
        return web.Response(body=self.body, status=self.status, content_type="text/plain")

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port, reuse_address=True).start()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
