"""`gpufrag watch --bus embedded` in enforce mode against the real kube-apiserver: a node whose
cards go out is quarantined (cordoned and tainted) through the API server while it is watched,
lifted when they come back, and each action's outcome is stored once.

The watcher is kept to the test's own node (a label selector) and reads no pods, so the
enforcing actuator can touch nothing another test put on the shared API server."""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio.client import ApiClient, CoreV1Api

from tests.app.pipeline_helpers import dsn_for, store_at
from tests.app.watch_helpers import NODE, PAGE, clean_env, start_watch
from tests.connectors.alerts.alerting import until
from tests.connectors.dcgm.exporter_server import FakeExporter
from tests.kube_fake.objects import node as node_object

pytestmark = pytest.mark.apiserver

QUARANTINE = "gpufrag.io/quarantine"
ACTIONS = (
    "SELECT id, kind, mode, outcome, target FROM actions FINAL "
    "WHERE run_id = {r:String} ORDER BY created_at, id"
)


def _condition(ready: bool) -> dict[str, Any]:
    """The EKS agent's condition: a ...Ready condition that is False takes the cards out."""
    return {
        "type": "AcceleratedHardwareReady",
        "status": "True" if ready else "False",
        "reason": "Healthy" if ready else "XidCritical",
    }


async def _sick_node(client: ApiClient, name: str, run: str) -> None:
    """A two-card H200 node (no kubelet behind it), its cards out from the start."""
    body = client.sanitize_for_serialization(
        node_object(name, gpus=2, product="NVIDIA-H200", labels={"gpufrag.test/run": run})
    )
    body["metadata"].pop("creationTimestamp", None)
    status = body.pop("status")
    core = CoreV1Api(client)
    await core.create_node(body)
    await core.patch_node_status(name, {"status": {**status, "conditions": [_condition(False)]}})


def _fenced(node: Any) -> bool:
    taints = node.spec.taints or []
    return bool(node.spec.unschedulable) and any(t.key == QUARANTINE for t in taints)


def _lifted(node: Any) -> bool:
    taints = node.spec.taints or []
    return not node.spec.unschedulable and not any(t.key == QUARANTINE for t in taints)


async def test_watch_embedded_enforcing_quarantines_a_sick_node_and_lifts_it(
    client: ApiClient, kubeconfig: Path, namespace: str, tmp_path: Path
) -> None:
    name = f"{namespace}-h200"
    core = CoreV1Api(client)
    await _sick_node(client, name, namespace)
    # the exporter's page names the test's node, so its samples join the watched node and
    # move event time on (instants get evaluated)
    exporter = FakeExporter(PAGE.read_bytes().replace(NODE.encode(), name.encode()))
    await exporter.start()
    dsn = dsn_for(tmp_path / "store")
    env = clean_env(
        GPUFRAG_KUBE__KUBECONFIG=str(kubeconfig),
        GPUFRAG_KUBE__RESOURCES='["nodes"]',
        GPUFRAG_KUBE__LABEL_SELECTORS=json.dumps({"nodes": f"gpufrag.test/run={namespace}"}),
        GPUFRAG_DCGM__INTERVAL_S="0.5",
        GPUFRAG_GUARDRAILS__MODE="enforce",
        GPUFRAG_ACTUATOR__NAMESPACE=namespace,
    )
    proc = await start_watch("--dcgm", exporter.url, "--bus", "embedded", "--store", dsn, env=env)
    communicate = asyncio.create_task(proc.communicate())

    async def state(want: Callable[[Any], bool]) -> bool:
        assert not communicate.done(), (await communicate)[1].decode()[-3000:]
        return want(await core.read_node(name))

    try:
        await until(lambda: state(_fenced), within_s=180)  # quarantined
        await core.patch_node_status(name, {"status": {"conditions": [_condition(True)]}})
        await until(lambda: state(_lifted), within_s=180)  # lifted
    finally:
        if not communicate.done():
            proc.send_signal(signal.SIGTERM)
        out, err = await asyncio.wait_for(communicate, 120)
        await exporter.stop()
        await core.delete_node(name)
    assert proc.returncode == 0, err.decode()[-3000:]
    run_id = out.decode().split("run ", 1)[1].split()[0]
    with store_at(dsn) as store:
        rows = store.query(ACTIONS, {"r": run_id}).rows
    executed = [r for r in rows if r[3] == "executed"]
    assert executed, rows
    assert {(str(r[1]), str(r[2]), str(r[4])) for r in executed} == {
        ("quarantine", "enforce", name)
    }, rows
    # one stored outcome per action id: the quarantine and its lifting
    ids = [r[0] for r in rows]
    assert len(ids) == len(set(ids)) and len(executed) >= 2, rows
