"""The one HTTP endpoint of a long-running command: ``/metrics``, ``/livez`` and ``/readyz``.

Kubernetes probes a pod's liveness and readiness separately, and Prometheus scrapes its
metrics, all on one port. ``prometheus_client.start_http_server`` answers every path with the
metrics (a probe of ``/readyz`` would read "ready" from any answer), so this server answers
the three paths and 404 for anything else.

- ``/livez``: the command's event loop still turns. A loop stuck in a blocking call for
  ``STALE_AFTER_S`` answers 503, so the kubelet restarts the pod; before the loop runs (or in
  a command with no loop of ours, the Faust worker) it is 200 while the process serves.
- ``/readyz``: every check the command registered holds (the sources have listed, the bus is
  connected, the store is writable, as each applies); 503 with the failing checks named
  otherwise, so a Service sends no traffic and a rollout waits.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import typer
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from streams.app.console.errors import EXIT_USAGE

__all__ = ["Health", "serve_health", "serve_health_or_exit"]

STALE_AFTER_S = 30.0
"""A loop that has not beaten for this long is stuck: 30 heartbeats of 1 s missed, far past a
slow chDB insert (0.2 s) or a GC pause on a busy 2-core machine."""
BEAT_EVERY_S = 1.0


class Health:
    """What a command's probes read: named readiness checks and the event loop's heartbeat."""

    def __init__(self) -> None:
        self._checks: dict[str, Callable[[], bool]] = {}
        self._lock = threading.Lock()
        self._last_beat: float | None = None

    def require(self, name: str, check: Callable[[], bool]) -> None:
        """Ready only while ``check()`` holds (a later check of the same name replaces it: a
        restarted source registers its own)."""
        with self._lock:
            self._checks[name] = check

    def checks(self) -> dict[str, bool]:
        """Each check's answer now; one that raises is not ready."""
        with self._lock:
            checks = dict(self._checks)
        out: dict[str, bool] = {}
        for name, check in checks.items():
            try:
                out[name] = bool(check())
            except Exception:
                out[name] = False
        return out

    def alive(self) -> bool:
        last = self._last_beat
        return last is None or time.monotonic() - last < STALE_AFTER_S

    async def heartbeat(self) -> None:
        """Beat every second until cancelled; run it as a task beside the command's work."""
        while True:
            self._last_beat = time.monotonic()
            await asyncio.sleep(BEAT_EVERY_S)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, addr: tuple[str, int], *, registry: CollectorRegistry, health: Health):
        super().__init__(addr, _Handler)
        self.registry = registry
        self.health = health


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        health = self.server.health
        if path == "/metrics":
            self._answer(200, generate_latest(self.server.registry), CONTENT_TYPE_LATEST)
        elif path == "/livez":
            alive = health.alive()
            self._answer(200 if alive else 503, b"ok\n" if alive else b"event loop stuck\n")
        elif path == "/readyz":
            checks = health.checks()
            ready = bool(checks) and all(checks.values())
            body = json.dumps({"ready": ready, "checks": checks}).encode() + b"\n"
            self._answer(200 if ready else 503, body, "application/json")
        else:
            text = f"not found: {path}; this server has /metrics, /livez and /readyz\n"
            self._answer(404, text.encode())

    def _answer(self, status: int, body: bytes, content_type: str = "text/plain") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Silent: a probe every few seconds would fill the command's stderr."""


def serve_health(
    port: int, *, addr: str, registry: CollectorRegistry, health: Health
) -> ThreadingHTTPServer:
    """Serve in a daemon thread until the process ends; OSError when the port is taken."""
    server = _Server((addr, port), registry=registry, health=health)
    threading.Thread(target=server.serve_forever, name="health", daemon=True).start()
    return server


def serve_health_or_exit(
    port: int | None, *, addr: str, registry: CollectorRegistry, health: Health
) -> None:
    """For a command's ``--metrics-port``: a taken port is one line and exit status 2."""
    if port is None:
        return
    try:
        serve_health(port, addr=addr, registry=registry, health=health)
    except OSError as exc:
        typer.echo(f"gpufrag: error: metrics port {port}: {exc.strerror}", err=True)
        raise typer.Exit(EXIT_USAGE) from None
