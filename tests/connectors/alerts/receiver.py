"""A local HTTP receiver standing in for Slack's incoming webhook or any JSON webhook: it keeps
every body it accepted, can answer with an error status (quoting the path it was sent to, as
Express' "Cannot POST /..." does), can take a request and never answer it, and can be stopped
and started again on the same port (an outage)."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
from aiohttp import web

from tests.ports import free_port


class Receiver:
    def __init__(self) -> None:
        self.port = free_port()
        self.bodies: list[Any] = []
        self.status = 200
        self.hits = 0
        self.paths: list[str] = []
        self.echo_path = False
        """An error answer quotes the path and query it was sent to."""
        self.hang = False
        """Take each request and answer none until stopped."""
        self._release = asyncio.Event()
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
        if self.hang:
            await self._release.wait()
        if self.status >= 300:
            text = f"Cannot POST {request.path_qs}" if self.echo_path else "invalid_payload"
            return web.Response(status=self.status, text=text)
        self.bodies.append(orjson.loads(await request.read()))
        return web.Response(text="ok")  # what Slack answers

    async def start(self) -> None:
        self._release = asyncio.Event()
        app = web.Application()
        app.router.add_post("/{path:.*}", self._hook)  # any path: /hook, /api/v2/alerts
        self._runner = web.AppRunner(app, access_log=None)  # the receiver's log is not ours
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port, reuse_address=True).start()

    async def stop(self) -> None:
        self._release.set()  # a held request ends, or the cleanup would wait on it
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
