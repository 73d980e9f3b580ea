"""The watchers converge on what a snapshot of the same objects says, whatever order the DRA
objects, nodes and pods arrive in: a claim's allocation after its pod, a pool's counters slice
after its devices, a class after the claims that name it, and deletions.

The objects are the real scheduler's (fixtures/dra/); the fake API server (tests/kube_fake)
serves them over HTTP to the real watchers, one at a time in a seeded shuffle, while they
watch. After each run the latest node and pod each emitted must equal ``read_snapshot`` of the
final objects."""

from __future__ import annotations

import copy
import random
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
from kubernetes_asyncio.client import ApiClient

from connectors.kube.watch.snapshot import read_snapshot
from models import KubeResource, Node, NodeEvent, Pod, PodEvent
from models.kube_resources import DRA_RESOURCES
from tests.connectors.kube.helpers import Collector, kube_settings, running
from tests.kube_fake import FakeApiServer, FakeCluster

SNAPSHOT = Path(__file__).parent / "fixtures" / "dra" / "snapshot.json"
DRA = "resource.k8s.io"
PLURALS = {
    "ResourceSlice": ("resourceslices", False),
    "DeviceClass": ("deviceclasses", False),
    "ResourceClaim": ("resourceclaims", True),
    "ResourceClaimTemplate": ("resourceclaimtemplates", True),
    "DeviceTaintRule": ("devicetaintrules", False),
}
WATCHED = (KubeResource.NODES, KubeResource.PODS, *DRA_RESOURCES)
WAIT_S = 60.0


def _objects() -> list[dict[str, Any]]:
    items = orjson.loads(SNAPSHOT.read_bytes())["items"]
    for item in items:
        for field in ("uid", "resourceVersion", "creationTimestamp"):
            item["metadata"].pop(field, None)
    return list(items)


def _latest(envelopes: list[Any]) -> tuple[dict[str, Node], dict[str, Pod]]:
    nodes: dict[str, Node] = {}
    pods: dict[str, Pod] = {}
    for env in envelopes:
        match env.payload:
            case NodeEvent(change="upsert", node=n):
                nodes[n.name] = n
            case NodeEvent(change="delete", node=n):
                nodes.pop(n.name, None)
            case PodEvent(change="upsert", pod=p):
                pods[p.key] = p
            case PodEvent(change="delete", pod=p):
                pods.pop(p.key, None)
    return nodes, pods


def _snapshot(cluster: FakeCluster) -> tuple[dict[str, Node], dict[str, Pod]]:
    items = [o for bucket in cluster.objects.values() for o in bucket.values()]
    data = orjson.dumps({"kind": "List", "items": items})
    snap = read_snapshot(data, source="fake", now=datetime.now(UTC), pool_label=None)
    return {n.name: n for n in snap.nodes}, {p.key: p for p in snap.pods}


def _delete(cluster: FakeCluster, obj: dict[str, Any]) -> None:
    kind, meta = obj["kind"], obj["metadata"]
    plural, _ = PLURALS.get(kind, (kind.lower() + "s", kind == "Pod"))
    group = DRA if kind in PLURALS else ""
    cluster.delete(plural, meta["name"], meta.get("namespace", ""), group=group, version="v1")


@pytest.mark.parametrize("seed", range(4))
async def test_any_arrival_order_converges_on_the_snapshot(
    seed: int, cluster: FakeCluster, server: FakeApiServer, api_client: ApiClient
) -> None:
    for kind, (plural, namespaced) in PLURALS.items():
        cluster.install(DRA, "v1", plural, kind, namespaced=namespaced)
    rng = random.Random(seed)
    objects = _objects()
    rng.shuffle(objects)
    # half the runs end by deleting a claim, a slice of the partitionable pool and the rule
    doomed = {"two-gpus", "gpu-node-c-gpu.nvidia.com-counters", "taint-node-b-gpu-3"}
    collector = Collector()
    settings = kube_settings(*WATCHED, page_size=500)
    async with running(api_client, settings, collector) as source:
        await collector.wait_for(source.listed, timeout=WAIT_S)
        for obj in objects:
            cluster.apply(copy.deepcopy(obj))
        if seed % 2:
            for obj in objects:
                if obj["metadata"]["name"] in doomed:
                    _delete(cluster, obj)
        want = _snapshot(cluster)
        await collector.wait_for(lambda: _latest(collector.envelopes) == want, timeout=WAIT_S)
    nodes, pods = want
    assert len(nodes) == 4 and len(pods) == 7
    two = pods["dra-test/pod-two-gpus"]
    assert two.gpu_indices == (() if seed % 2 else (0, 1))
