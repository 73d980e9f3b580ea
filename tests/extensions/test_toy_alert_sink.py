"""An alert sink from a plugin, with no edit to any product module: `gpufrag watch --bus
embedded --alerts` loads ``tests.extensions.toy_alert_sink`` (``GPUFRAG_PLUGINS``), switches it on
by name (``GPUFRAG_ALERTS__SINKS``), and the toy, which is not HTTP, receives a signal opened by
the live pipeline and then its resolution; a sink name nobody registered is refused in one line
with the known names."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import orjson

from tests.app.pipeline_helpers import dsn_for
from tests.app.watch_helpers import NODE, PAGE, clean_env, kubeconfig_for, sick_node, start_watch
from tests.connectors.alerts.alerting import until
from tests.connectors.dcgm.exporter_server import FakeExporter
from tests.extensions.toy_alert_sink import FILE_VARIABLE
from tests.kube_fake import FakeApiServer, FakeCluster
from tests.kube_fake.objects import node

ROOT = Path(__file__).parents[2]
PLUGIN = '["tests.extensions.toy_alert_sink"]'


@asynccontextmanager
async def sick_node_cluster(tmp_path: Path) -> AsyncIterator[tuple[FakeCluster, str, Path]]:
    """The fake API server with a node whose cards are out (one ``gpu_unhealthy`` signal), an
    exporter of that node's page, and a kubeconfig for the server."""
    cluster = FakeCluster()
    cluster.apply(sick_node())
    server = FakeApiServer(cluster)
    exporter = FakeExporter(PAGE.read_bytes())  # events every scrape: instants get evaluated
    await server.start()
    await exporter.start()
    try:
        yield cluster, exporter.url, kubeconfig_for(tmp_path / "kubeconfig", server)
    finally:
        await exporter.stop()
        await server.stop()
        await cluster.close()


def _received(path: Path) -> list[dict[str, object]]:
    if not path.exists():
        return []
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def _statuses(path: Path) -> list[object]:
    return [a["status"] for a in _received(path)]


async def test_the_toy_sink_receives_an_opened_and_a_resolved_signal(tmp_path: Path) -> None:
    got = tmp_path / "toy-alerts.jsonl"
    async with sick_node_cluster(tmp_path) as (cluster, exporter, kubeconfig):
        env = clean_env(
            PYTHONPATH=str(ROOT),
            GPUFRAG_PLUGINS=PLUGIN,
            GPUFRAG_ALERTS__SINKS='["toy"]',
            GPUFRAG_KUBE__KUBECONFIG=str(kubeconfig),
            GPUFRAG_KUBE__RESOURCES='["pods", "nodes"]',
            GPUFRAG_DCGM__INTERVAL_S="0.5",
            **{FILE_VARIABLE: str(got)},
        )
        dsn = dsn_for(tmp_path / "store")
        proc = await start_watch(
            "--dcgm", exporter, "--bus", "embedded", "--store", dsn, "--alerts", env=env
        )
        communicate = asyncio.create_task(proc.communicate())
        try:
            await until(lambda: "firing" in _statuses(got) or communicate.done(), within_s=120)
            cluster.apply(node(NODE, gpus=2, product="NVIDIA-H200"))  # its cards back
            await until(lambda: "resolved" in _statuses(got) or communicate.done(), within_s=120)
        finally:
            if proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
            try:
                out, err = await asyncio.wait_for(communicate, 120)
            finally:
                if proc.returncode is None:
                    proc.kill()
    assert proc.returncode == 0, err.decode()[-3000:]
    alerts = _received(got)
    assert [a["status"] for a in alerts] == ["firing", "resolved"], alerts
    assert {a["labels"]["alertname"] for a in alerts} == {"gpu_unhealthy"}  # type: ignore[index]
    assert len({a["fingerprint"] for a in alerts}) == 1
    assert "2 alerts to toy: 2 sent, 0 dead-lettered)" in out.decode(), out.decode()


async def test_a_sink_name_nobody_registered_is_refused_with_the_known_names(
    tmp_path: Path,
) -> None:
    env = clean_env(PYTHONPATH=str(ROOT), GPUFRAG_PLUGINS=PLUGIN, GPUFRAG_ALERTS__SINKS='["pager"]')
    args = ("--no-kube", "--nvml", "--bus", "embedded", "--store", dsn_for(tmp_path / "st"))
    proc = await start_watch(*args, "--alerts", env=env)
    _, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 2, err.decode()
    assert err.decode().splitlines() == [
        "gpufrag: error: unknown alert sink 'pager' (known: alertmanager, slack, webhook, toy)"
    ]
