"""A scripted API server over real HTTP for what the real one will not do on demand: answer
5xx, throttle with 429, or lose every write to a conflict. Answers are Status objects shaped
as kube-apiserver writes them; every request is recorded (method, path, body)."""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from kubernetes_asyncio.client import ApiClient, Configuration

from tests.ports import free_port


def status(code: int, reason: str, message: str, *causes: dict[str, str]) -> dict[str, Any]:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if causes:
        body["details"] = {"causes": list(causes)}
    return body


SERVER_ERROR = (500, status(500, "InternalError", "etcdserver: request timed out"))
BUDGET = (
    429,
    status(
        429,
        "TooManyRequests",
        "Cannot evict pod as it would violate the pod's disruption budget.",
        {"reason": "DisruptionBudget", "message": "The disruption budget p needs 1 healthy pods"},
    ),
)
THROTTLED = (429, status(429, "TooManyRequests", "Too many requests, please try again later."))
CONFLICT = (409, status(409, "Conflict", 'Operation cannot be fulfilled on nodes "n"'))
EVICTED = (201, status(201, "", "") | {"status": "Success"})


@dataclass
class Script:
    """Answers per (method, path), served in order; the last one repeats."""

    answers: dict[tuple[str, str], deque[tuple[int, dict[str, Any]]]] = field(default_factory=dict)
    seen: list[tuple[str, str, Any]] = field(default_factory=list)

    def on(self, method: str, path: str, *answers: tuple[int, dict[str, Any]]) -> None:
        self.answers[(method, path)] = deque(answers)

    def requests(self, method: str, path: str) -> list[Any]:
        return [body for m, p, body in self.seen if (m, p) == (method, path)]


SCRIPT = web.AppKey("script", Script)


async def _handle(request: web.Request) -> web.Response:
    script = request.app[SCRIPT]
    body = await request.json() if request.can_read_body else None
    script.seen.append((request.method, request.path, body))
    queue = script.answers.get((request.method, request.path))
    if not queue:
        code, answer = 404, status(404, "NotFound", f"{request.path} not found")
    else:
        code, answer = queue[0] if len(queue) == 1 else queue.popleft()
    # Retry-After 0: APF sends one with its 429; zero keeps the test fast.
    return web.json_response(answer, status=code, headers={"Retry-After": "0"})


@contextlib.asynccontextmanager
async def serving(script: Script) -> AsyncIterator[ApiClient]:
    """The scripted server, up, and a client for it."""
    app = web.Application()
    app[SCRIPT] = script
    app.router.add_route("*", "/{tail:.*}", _handle)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    client = ApiClient(configuration=Configuration(host=f"http://127.0.0.1:{port}"))
    try:
        yield client
    finally:
        await client.close()
        await runner.cleanup()
