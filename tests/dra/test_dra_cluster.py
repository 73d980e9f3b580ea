"""Issue 29's acceptance on a real kube-apiserver and kube-scheduler (v1.37, DRA's API on by
default): a mixed fleet published as the NVIDIA driver publishes it, claims allocated and pods
bound by the real scheduler while gpufrag's watchers run (each allocation arrives after the
pod it is for), and a ``kubectl get -o json`` snapshot of the same objects read afterwards.

- Every device's used and free capacity in the profiles is what the claims' allocations say
  (``device_checks.check_profiles`` reads the allocations straight from the objects).
- The snapshot (``gpufrag inspect``'s reader) and the watchers give equal nodes and pods.
- A claim for six GPUs that no node has, while seven lie free across the A100 nodes, is pending,
  and the explanation says it fits the cluster's total but no one node, for lack of cards.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
from prometheus_client import CollectorRegistry

from connectors.kube import KubeSource
from connectors.kube.client import api_client_for
from connectors.kube.watch.snapshot import read_snapshot
from connectors.refusals import RefusalLog
from models import AnalysisSettings, KubeResource, KubeSettings, Node, NodeEvent, Pod, PodEvent
from models.kube_resources import DRA_RESOURCES
from streams.inspection import inspect_cluster
from streams.profiles.join import task_profile
from streams.profiles.node_profile import node_profile
from streams.profiles.operators import ProfileJoin
from tests.deploy.kube_http import Kube
from tests.dra import cluster_objects as co
from tests.dra.device_checks import allocated, check_profiles
from tests.local_apiserver import apiserver_at
from tests.scheduler import cluster_run as cr

pytestmark = pytest.mark.dra

NS = "dra-e2e"
A100_NODES = ("a100-0", "a100-1", "a100-2")
WAIT_S = 120.0
"""The scheduler binds within seconds here; a busy 2-core machine is given far longer."""
WATCHED = (KubeResource.NODES, KubeResource.PODS, *DRA_RESOURCES)
LISTS = (
    ("/api/v1/nodes", "Node"),
    (f"/api/v1/namespaces/{NS}/pods", "Pod"),
    ("/apis/resource.k8s.io/v1/resourceslices", "ResourceSlice"),
    ("/apis/resource.k8s.io/v1/deviceclasses", "DeviceClass"),
    (f"/apis/resource.k8s.io/v1/namespaces/{NS}/resourceclaims", "ResourceClaim"),
)

CLAIMS = [
    co.claim(NS, "two", "gpu.nvidia.com", count=2),
    co.claim(NS, "three", "gpu.nvidia.com", count=3),
    co.claim(NS, "six", "gpu.nvidia.com", count=6),
    co.claim(
        NS,
        "mig-3g",
        "mig.nvidia.com",
        count=2,
        selector='device.attributes["gpu.nvidia.com"].profile == "3g.40gb"',
    ),
    co.claim(
        NS,
        "mig-1g",
        "mig.nvidia.com",
        selector='device.attributes["gpu.nvidia.com"].profile == "1g.10gb"',
    ),
    co.claim(NS, "share-20", "gpu-share.example.com", memory="20Gi"),
    co.claim(NS, "share-30", "gpu-share.example.com", memory="30Gi"),
]
PODS = [
    co.pod(NS, "p-two", claim_name="two"),
    co.pod(NS, "p-three", claim_name="three"),
    co.pod(NS, "p-mig-3g", claim_name="mig-3g"),
    co.pod(NS, "p-mig-1g", claim_name="mig-1g"),
    co.pod(NS, "p-share-20", claim_name="share-20"),
    co.pod(NS, "p-share-30", claim_name="share-30"),
    co.pod(NS, "p-extended", resources={"example.com/gpu-share": "1"}),
    co.pod(NS, "p-plugin", resources={"nvidia.com/gpu": "1"}),
]
PENDING = co.pod(NS, "p-six", claim_name="six")


def _fleet() -> list[dict[str, Any]]:
    plugin_labels = {
        "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
        "nvidia.com/gpu.count": "2",
        "nvidia.com/gpu.replicas": "4",
        "nvidia.com/gpu.memory": "81920",
    }
    out = co.classes()
    out += [co.node(n) for n in (*A100_NODES, "h100-0", "share-0")]
    out.append(co.node("plugin-0", labels=plugin_labels, gpus="8"))
    for n in A100_NODES:
        out += co.whole_gpus(n, 4)
    out += co.partitionable_h100s("h100-0", 2)
    out += co.shared_gpu("share-0")
    return out


def _create(kube: Kube, obj: dict[str, Any]) -> None:
    status, body = kube.create(obj, dry_run=False)
    assert status == 201, (obj["kind"], obj["metadata"]["name"], status, body)


def _untaint(kube: Kube, name: str) -> None:
    """Admission gives a new Node the not-ready taint; no node controller runs to lift it."""
    status, node = kube.call("GET", f"/api/v1/nodes/{name}")
    assert status == 200, node
    node["spec"]["taints"] = []
    status, body = kube.call("PUT", f"/api/v1/nodes/{name}", node)
    assert status == 200, body


def _pods(kube: Kube) -> dict[str, dict[str, Any]]:
    status, body = kube.call("GET", f"/api/v1/namespaces/{NS}/pods")
    assert status == 200, body
    return {p["metadata"]["name"]: p for p in body["items"]}


def _unschedulable(pod: dict[str, Any]) -> bool:
    return any(
        c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable"
        for c in pod.get("status", {}).get("conditions", [])
    )


def _snapshot_bytes(kube: Kube) -> bytes:
    items = []
    for path, kind in LISTS:
        status, body = kube.call("GET", path)
        assert status == 200, (path, body)
        items += [{**i, "kind": kind} for i in body["items"]]
    return orjson.dumps({"kind": "List", "apiVersion": "v1", "items": items})


@dataclass(slots=True)
class Watched:
    """What the watchers emitted so far, and the profile join fed with it."""

    nodes: dict[str, Node] = field(default_factory=dict)
    pods: dict[str, Pod] = field(default_factory=dict)
    join: ProfileJoin = field(default_factory=ProfileJoin)

    async def emit(self, env: Any) -> None:
        self.join.apply(env)
        match env.payload:
            case NodeEvent(change="upsert", node=n):
                self.nodes[n.name] = n
            case PodEvent(change="upsert", pod=p):
                self.pods[p.name] = p


@contextlib.asynccontextmanager
async def watching(kubeconfig: Path) -> AsyncIterator[tuple[Watched, KubeSource]]:
    api = await api_client_for(KubeSettings(kubeconfig=str(kubeconfig)))
    seen, registry = Watched(), CollectorRegistry()
    source = KubeSource(
        api_client=api,
        settings=KubeSettings(kubeconfig=str(kubeconfig), resources=WATCHED),
        emit=seen.emit,
        registry=registry,
        refusals=RefusalLog(registry=registry),
        rng=random.Random(7),
    )
    stop = asyncio.Event()
    task = asyncio.create_task(source.run(stop=stop))
    try:
        yield seen, source
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
        await api.close()


async def _until(what: str, check: Callable[[], Any]) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_S
    while not await asyncio.to_thread(check):
        assert loop.time() < deadline, f"not within {WAIT_S:.0f} s: {what}"
        await asyncio.sleep(0.2)


async def test_profiles_count_dra_devices_as_allocated_and_inspect_agrees(
    tmp_path: Path,
) -> None:
    with apiserver_at(tmp_path / "apiserver") as api:
        run_dir = api.ca_cert.parent.parent
        kube = Kube(api)
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
        kube.namespace(NS)
        for obj in _fleet():
            _create(kube, obj)
        for name in (*A100_NODES, "h100-0", "share-0", "plugin-0"):
            _untaint(kube, name)
        # the watchers run while the claims are made and allocated: each claim's allocation
        # arrives after its pod, and must be laid over the pod it names when it does
        async with watching(kubeconfig) as (seen, source):
            await _until("the watchers listed every resource", source.listed)
            for obj in [*CLAIMS, *PODS, PENDING]:
                _create(kube, obj)
            await asyncio.to_thread(cr.start_scheduler, run_dir, "", prioritize=False)
            try:
                await _until(
                    "every pod bound but p-six, which the scheduler found unschedulable",
                    lambda: (
                        (pods := _pods(kube))
                        and all(pods[p["metadata"]["name"]]["spec"].get("nodeName") for p in PODS)
                        and _unschedulable(pods["p-six"])
                    ),
                )
            finally:
                await asyncio.to_thread(cr.stop_scheduler, run_dir)
            snap = read_snapshot(
                _snapshot_bytes(kube), source="cluster.json", now=datetime.now(UTC), pool_label=None
            )
            want_nodes = {n.name: n for n in snap.nodes}
            want_pods = {p.name: p for p in snap.pods}
            await _until(
                "the watchers' nodes and pods equal the snapshot's",
                lambda: seen.nodes == want_nodes and seen.pods == want_pods,
            )
            book = source.dra.book

    want = allocated(book)
    # the allocations themselves: what the scheduler did with this fleet
    assert sum(len(want[n].whole) for n in A100_NODES) == 5
    assert want["h100-0"].mig == {"3g.40gb": 2, "1g.10gb": 1}
    assert sorted(want["share-0"].shared_mib.values()) == [20 * 1024 + 30 * 1024 + 10 * 1024]
    # every device of every node, in the watchers' profiles and in the snapshot's
    assert check_profiles(book, seen.join.node_profiles) == 3 * 4 + 2 + 1
    at = datetime.now(UTC)
    tasks = [task_profile(p, None, at=at) for p in snap.pods]
    snap_profiles = {
        n.name: node_profile(n, [t for t in tasks if t.node == n.name], {}, at=at)
        for n in snap.nodes
    }
    assert check_profiles(snap.dra.book, snap_profiles) == 3 * 4 + 2 + 1
    plugin = seen.nodes["plugin-0"]
    assert (plugin.gpu_count, plugin.gpu_replicas) == (2, 4)  # the device plugin's, untouched
    inspection = inspect_cluster(snap.nodes, snap.pods, [], at=at, settings=AnalysisSettings())
    six = next(v for v in inspection.pending if v.pod == f"{NS}/p-six")
    assert six.fits_cluster_total and not six.fits_some_node
    assert "gpu_count" in six.blocking
