"""A real Alertmanager (Debian's ``prometheus-alertmanager``, installed by .ci/run) on a free
loopback port, with its own config and storage in a temp directory; a test can stop it and
start it again on the same port."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
from pathlib import Path

import aiohttp

from tests.ports import free_port

BINARY = os.environ.get("GPUFRAG_TEST_ALERTMANAGER_BIN", "/usr/bin/prometheus-alertmanager")

# One route to a receiver that notifies nobody: the tests read what Alertmanager holds
# through its API, not what it would send.
CONFIG = """\
route:
  receiver: nobody
  group_by: [alertname, cluster]
receivers:
  - name: nobody
"""

READY_WITHIN_S = 60.0
"""Alertmanager is ready in about 0.1 s on an idle machine; a busy 2-core one, much later."""


def alertmanager_binary() -> str:
    found = shutil.which(BINARY) or (BINARY if Path(BINARY).exists() else None)
    if found is None:
        raise AssertionError(
            f"{BINARY} not found: .ci/run installs Debian's prometheus-alertmanager "
            "(apt-get install prometheus-alertmanager)"
        )
    return found


class Alertmanager:
    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        (workdir / "alertmanager.yml").write_text(CONFIG)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        log = (self.workdir / "alertmanager.log").open("ab")
        self.proc = subprocess.Popen(
            [
                alertmanager_binary(),
                f"--config.file={self.workdir / 'alertmanager.yml'}",
                f"--storage.path={self.workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--cluster.listen-address=",  # no gossip port: one instance, nothing to join
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        await self._until_ready()

    async def _until_ready(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + READY_WITHIN_S
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as session:
            while True:
                assert self.proc is not None
                if self.proc.poll() is not None:
                    raise AssertionError(f"alertmanager exited:\n{self.log_tail()}")
                # not listening yet, or not ready: asked again until the deadline
                with contextlib.suppress(aiohttp.ClientError, OSError, TimeoutError):
                    async with session.get(f"{self.url}/-/ready") as resp:
                        if resp.status == 200:
                            return
                if loop.time() > deadline:
                    raise AssertionError(f"alertmanager not ready:\n{self.log_tail()}")
                await asyncio.sleep(0.05)

    async def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.terminate()
        try:
            await asyncio.to_thread(self.proc.wait, 30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            await asyncio.to_thread(self.proc.wait, 30)
        self.proc = None

    async def alerts(self) -> list[dict[str, object]]:
        """What GET /api/v2/alerts lists: the alerts that have not ended."""
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session,
            session.get(f"{self.url}/api/v2/alerts") as resp,
        ):
            assert resp.status == 200, await resp.text()
            body: list[dict[str, object]] = await resp.json()
            return body

    def log_tail(self) -> str:
        path = self.workdir / "alertmanager.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""
