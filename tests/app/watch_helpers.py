"""What the `gpufrag watch` tests share: the command as a subprocess (with its /metrics read
while it runs), a clean environment, a kubeconfig for the fake API server, and a node whose
cards are out."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import aiohttp
from kubernetes_asyncio.client import V1Node, V1NodeCondition
from prometheus_client.parser import text_string_to_metric_families

from tests.kube_fake import FakeApiServer
from tests.kube_fake.objects import node

PAGE = Path(__file__).parents[1] / "connectors" / "dcgm" / "fixtures" / "plain_h200.txt"
NODE = "gpu-h200-07"  # the fixture page's Hostname label


def kubeconfig_for(path: Path, server: FakeApiServer) -> Path:
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "fake", "cluster": {"server": server.url}}],
                "users": [{"name": "tester", "user": {"token": server.token}}],
                "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "tester"}}],
                "current-context": "fake",
            }
        )
    )
    return path


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUFRAG_")}
    return {**env, **extra}


async def start_watch(*args: str, env: dict[str, str]) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "streams.app",
        "watch",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )


def sick_node() -> V1Node:
    """The fixture page's node, its cards out: one ``gpu_unhealthy`` signal."""
    sick = node(NODE, gpus=2, product="NVIDIA-H200")
    # the EKS agent's condition: a ...Ready condition that is False takes the cards out
    sick.status.conditions = [
        V1NodeCondition(type="AcceleratedHardwareReady", status="False", reason="XidCritical")
    ]
    return sick


@dataclass(slots=True)
class Finished:
    returncode: int
    stdout: str
    stderr: str
    metrics: str
    """The /metrics page as read while the command ran."""


async def run_watch(
    *args: str,
    env: dict[str, str],
    metrics_port: int,
    ready: Callable[[str], bool],
    terminate_when_ready: bool = False,
) -> Finished:
    """Run the command; while it runs, read its /metrics over HTTP until ``ready`` holds (and
    then, with ``terminate_when_ready``, stop it as Kubernetes stops a pod: SIGTERM)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "streams.app",
        "watch",
        "--metrics-port",
        str(metrics_port),
        "--metrics-addr",
        "127.0.0.1",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    communicate = asyncio.create_task(proc.communicate())
    page = ""
    async with aiohttp.ClientSession() as session:
        while not ready(page) and not communicate.done():
            try:
                async with session.get(f"http://127.0.0.1:{metrics_port}/metrics") as resp:
                    page = await resp.text()
            except aiohttp.ClientConnectionError:
                pass  # not listening yet
            await asyncio.sleep(0.2)
    if terminate_when_ready and not communicate.done():
        proc.send_signal(signal.SIGTERM)
    try:
        out, err = await asyncio.wait_for(communicate, 60)
    except TimeoutError:
        proc.kill()
        raise
    return Finished(proc.returncode or 0, out.decode(), err.decode(), page)


def sample_value(page: str, name: str, **labels: str) -> float | None:
    for family in text_string_to_metric_families(page):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return float(s.value)
    return None
