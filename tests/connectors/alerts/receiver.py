"""A local HTTP receiver standing in for Slack's incoming webhook or any JSON webhook: it keeps
every body it accepted, can answer with an error status, and can be stopped and started again
on the same port (an outage)."""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from tests.connectors.dcgm.exporter_server import free_port


class Receiver:
    def __init__(self) -> None:
        self.port = free_port()
        self.bodies: list[Any] = []
        self.status = 200
        self.hits = 0
        self.paths: list[str] = []
        self._runner: web.AppRunner | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.base}/hook"

    async def _hook(self, request: web.Request) -> web.Response:
        self.hits += 1
        self.paths.append(request.path)
        if self.status >= 300:
            return web.Response(status=self.status, text="invalid_payload")
        self.bodies.append(orjson.loads(await request.read()))
        return web.Response(text="ok")  # what Slack answers

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/{path:.*}", self._hook)  # any path: /hook, /api/v2/alerts
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port, reuse_address=True).start()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
