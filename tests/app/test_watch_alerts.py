"""`gpufrag watch --bus embedded --alerts`: a signal the embedded pipeline opens from a live
source reaches the webhook while it is stored; and the option's refusals."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

from kubernetes_asyncio.client import V1NodeCondition

from tests.app.pipeline_helpers import dsn_for, stored_signals
from tests.connectors.alerts.alerting import until
from tests.connectors.alerts.receiver import Receiver
from tests.connectors.dcgm.exporter_server import FakeExporter
from tests.kube_fake import FakeApiServer, FakeCluster
from tests.kube_fake.objects import node

PAGE = Path(__file__).parents[1] / "connectors" / "dcgm" / "fixtures" / "plain_h200.txt"
NODE = "gpu-h200-07"  # the fixture page's Hostname label


def _kubeconfig(path: Path, server: FakeApiServer) -> Path:
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


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUFRAG_")}
    return {**env, **extra}


async def _watch(*args: str, env: dict[str, str]) -> asyncio.subprocess.Process:
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


async def test_a_signal_of_the_live_pipeline_reaches_the_webhook(tmp_path: Path) -> None:
    cluster = FakeCluster()
    sick = node(NODE, gpus=2, product="NVIDIA-H200")
    # the EKS agent's condition: a ...Ready condition that is False takes the cards out
    sick.status.conditions = [
        V1NodeCondition(type="AcceleratedHardwareReady", status="False", reason="XidCritical")
    ]
    cluster.apply(sick)
    server = FakeApiServer(cluster)
    exporter = FakeExporter(PAGE.read_bytes())  # events every scrape: instants get evaluated
    hook = Receiver()
    for svc in (server, exporter, hook):
        await svc.start()
    dsn = dsn_for(tmp_path / "store")
    try:
        env = _env(
            GPUFRAG_KUBE__KUBECONFIG=str(_kubeconfig(tmp_path / "kubeconfig", server)),
            GPUFRAG_KUBE__RESOURCES='["pods", "nodes"]',
            GPUFRAG_DCGM__INTERVAL_S="0.5",
            GPUFRAG_ALERTS__WEBHOOK_URL=hook.url,
            GPUFRAG_ALERTS__CLUSTER="live-test",
        )
        args = ("--dcgm", exporter.url, "--bus", "embedded", "--store", dsn, "--alerts")
        proc = await _watch(*args, env=env)
        communicate = asyncio.create_task(proc.communicate())
        try:
            await until(lambda: bool(hook.bodies) or communicate.done(), within_s=120)
        finally:
            if proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
            out, err = await asyncio.wait_for(communicate, 120)
    finally:
        for svc in (hook, exporter, server):
            await svc.stop()
        await cluster.close()
    assert proc.returncode == 0, err.decode()[-3000:]
    assert "1 alerts)" in out.decode(), out.decode()
    alert = hook.bodies[0]["alerts"][0]
    assert alert["status"] == "firing"
    assert alert["labels"]["alertname"] == "gpu_unhealthy"
    assert (alert["labels"]["node"], alert["labels"]["cluster"]) == (NODE, "live-test")
    assert "AcceleratedHardwareReady" in alert["annotations"]["summary"]
    stored = [s for s in stored_signals(dsn) if s["kind"] == "gpu_unhealthy"]
    assert [s["fingerprint"] for s in stored] == [alert["fingerprint"]]


async def test_alerts_are_refused_without_a_sink_or_on_the_kafka_bus() -> None:
    for args, needle in (
        (("--no-kube", "--nvml", "--bus", "embedded", "--alerts"), "no alert sink"),
        (("--no-kube", "--nvml", "--bus", "kafka", "--alerts"), "gpufrag alert"),
    ):
        env = _env(GPUFRAG_ALERTS__WEBHOOK_URL="http://127.0.0.1:9/") if "kafka" in args else _env()
        proc = await _watch(*args, env=env)
        _, err = await asyncio.wait_for(proc.communicate(), 120)
        assert proc.returncode == 2, err.decode()
        assert needle in err.decode(), err.decode()
