"""The probes' endpoint: /metrics, /livez, /readyz and 404, in-process and as `gpufrag watch`
serves it against the real kube-apiserver.

The watch test puts a TCP relay between the command and the apiserver that holds every
connection until the test lets it through, so "before the first list" is a state the test
controls, not a race it hopes to win."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Counter

from models import GpufragSettings
from streams.app.lifecycle import probes as health_module
from streams.app.lifecycle.probes import Health, serve_health
from streams.app.lifecycle.run_record import RunSpec
from streams.app.lifecycle.session import Session
from tests.app.pipeline_helpers import dsn_for
from tests.http_probe import get
from tests.local_apiserver import ApiServer
from tests.paths import REPO_ROOT
from tests.ports import free_port

DEADLINE_S = 120.0


def test_the_three_paths_and_404() -> None:
    registry = CollectorRegistry()
    Counter("gpufrag_probe_test_total", "a counter", registry=registry).inc(3)
    health = Health()
    port = free_port()
    server = serve_health(port, addr="127.0.0.1", registry=registry, health=health)
    try:
        status, text = get(port, "/metrics")
        assert status == 200 and "gpufrag_probe_test_total 3.0" in text
        assert get(port, "/livez") == (200, "ok\n")
        # nothing registered yet: a command that has not set itself up is not ready
        status, text = get(port, "/readyz")
        assert status == 503 and json.loads(text) == {"ready": False, "checks": {}}
        store_ok = [False]
        health.require("store writable", lambda: store_ok[0])
        health.require("bus connected", lambda: True)
        status, text = get(port, "/readyz")
        assert status == 503
        assert json.loads(text)["checks"] == {"store writable": False, "bus connected": True}
        store_ok[0] = True
        assert get(port, "/readyz")[0] == 200
        health.require("broken", lambda: 1 / 0 > 0)  # a check that raises is not ready
        assert get(port, "/readyz")[0] == 503
        status, text = get(port, "/nope")
        assert status == 404 and "/metrics, /livez and /readyz" in text
        assert get(port, "/metrics?name[]=x")[0] == 200
    finally:
        server.shutdown()


async def test_a_stuck_event_loop_is_not_alive(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(health_module, "STALE_AFTER_S", 0.5)
    health = Health()
    port = free_port()
    server = serve_health(port, addr="127.0.0.1", registry=CollectorRegistry(), health=health)
    beat = asyncio.create_task(health.heartbeat())
    try:
        await asyncio.sleep(0.05)
        assert get(port, "/livez")[0] == 200
        time.sleep(1.5)  # the loop blocked: no beat for three times the limit
        assert get(port, "/livez") == (503, "event loop stuck\n")
        await asyncio.sleep(0.05)  # the loop turns again and beats
        assert get(port, "/livez")[0] == 200
    finally:
        beat.cancel()
        server.shutdown()


class HeldRelay:
    """A TCP relay to ``upstream`` that holds each connection until ``release`` is set."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.release = asyncio.Event()
        self.held = 0
        self.port = 0
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.held += 1
        try:
            await self.release.wait()
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
            with contextlib.suppress(ConnectionError):  # either side hung up: the relay ends
                await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        finally:
            writer.close()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    finally:
        with contextlib.suppress(Exception):
            writer.close()


def relayed_kubeconfig(apiserver: ApiServer, port: int, path: Path) -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "relay",
                "cluster": {
                    "server": f"https://127.0.0.1:{port}",
                    "certificate-authority": str(apiserver.ca_cert),
                },
            }
        ],
        "users": [{"name": "admin", "user": {"token": apiserver.token}}],
        "contexts": [{"name": "relay", "context": {"cluster": "relay", "user": "admin"}}],
        "current-context": "relay",
    }
    path.write_text(json.dumps(config))
    return path


async def readiness(port: int) -> tuple[int, dict[str, object]] | None:
    """The /readyz answer, or None while the command is not serving yet."""
    try:
        status, text = await asyncio.to_thread(get, port, "/readyz")
    except OSError:
        return None
    return status, json.loads(text)


async def wait_for(port: int, want: str) -> tuple[int, dict[str, object]]:
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        answer = await readiness(port)
        if answer is not None:
            checks = answer[1]["checks"]
            assert isinstance(checks, dict)
            listed = [v for k, v in checks.items() if k.endswith("listed")]
            if want == "held" and listed == [False]:
                return answer
            if want == "ready" and answer[0] == 200:
                return answer
        await asyncio.sleep(0.2)
    raise AssertionError(f"/readyz never showed {want!r}: last {answer}")


@contextlib.asynccontextmanager
async def watching(env: dict[str, str], store: str, port: int) -> AsyncIterator[None]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        *("-m", "streams.app", "watch", "--bus", "embedded", "--store", store),
        *("--metrics-port", str(port), "--metrics-addr", "127.0.0.1"),
        cwd=REPO_ROOT,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        yield
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(proc.communicate(), DEADLINE_S)
        assert proc.returncode == 0, err.decode()[-2000:]


@pytest.mark.apiserver
async def test_watch_is_ready_only_once_the_sources_have_listed(
    apiserver: ApiServer, tmp_path: Path
) -> None:
    host, port = apiserver.url.removeprefix("https://").rsplit(":", 1)
    relay = HeldRelay((host, int(port)))
    await relay.start()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUFRAG_")}
    env.update(
        GPUFRAG_KUBE__KUBECONFIG=str(relayed_kubeconfig(apiserver, relay.port, tmp_path / "kc")),
        GPUFRAG_KUBE__RESOURCES='["pods", "nodes"]',
        GPUFRAG_KUBE__REQUEST_TIMEOUT_S="5",
        GPUFRAG_KUBE__BACKOFF_MAX_S="1",
    )
    metrics_port = free_port()
    try:
        async with watching(env, dsn_for(tmp_path / "store"), metrics_port):
            status, body = await wait_for(metrics_port, "held")
            assert status == 503 and body["ready"] is False
            # the listed check exists from the source's start, before its first list call
            # reaches the relay (on a busy machine seconds later: CI once found none held
            # yet), so wait for the watchers' try, then for the probe still to say no
            deadline = time.monotonic() + DEADLINE_S
            while relay.held < 1 and time.monotonic() < deadline:
                await asyncio.sleep(0.2)
            assert relay.held >= 1  # the watchers did try: the relay holds them
            status, body = await wait_for(metrics_port, "held")
            assert status == 503 and body["ready"] is False
            assert get(metrics_port, "/livez")[0] == 200
            relay.release.set()
            status, body = await wait_for(metrics_port, "ready")
            assert body["ready"] is True
            checks = body["checks"]
            assert isinstance(checks, dict) and checks.get("store writable") is True
            assert get(metrics_port, "/nope")[0] == 404
    finally:
        await relay.stop()


async def test_recording_a_run_adds_no_readiness_check_of_its_own(tmp_path: Path) -> None:
    # A check registered alone reads "ready" until the command adds the others (a sink
    # answered ready before its consumer existed); the command adds the store's with them.
    session = Session("test", store=dsn_for(tmp_path / "st"), settings=GpufragSettings())
    info = RunSpec(run_id="r", source="test", mode="test")
    async with session.recorded(info) as (record, sink):
        assert session.health.checks() == {}
        session.require_store(sink)
        assert session.health.checks() == {"store writable": True}
        await sink.stop()
        await record.end("finished", {})
