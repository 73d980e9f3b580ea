"""Objects, probes and waits for the watcher tests against the real kube-apiserver."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import random
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio.client import (
    ApiClient,
    CoreV1Api,
    V1Binding,
    V1Container,
    V1DeleteOptions,
    V1Node,
    V1NodeSpec,
    V1NodeStatus,
    V1ObjectMeta,
    V1ObjectReference,
    V1Pod,
    V1PodSpec,
    V1ResourceRequirements,
)
from prometheus_client import CollectorRegistry

from connectors.kube import KubeSource, Reflector
from connectors.kube.watch.api import KubeApiError, Page
from connectors.refusals import RefusalLog
from models import Envelope, KubeResource, KubeSettings, NodeEvent, PodEvent
from tests.connectors.kube.helpers import Collector
from tests.local_apiserver import ApiServer

PODS, NODES = KubeResource.PODS, KubeResource.NODES
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
WAIT_S = 10.0
"""Upper bound for anything the server should do promptly (a 2-core CI machine, busy)."""


# --- the real server ------------------------------------------------------------------------


async def compact_etcd(apiserver: ApiServer) -> int:
    """Compact etcd's history up to its current revision (what kube-apiserver does every
    --etcd-compaction-interval); returns that revision."""
    async with aiohttp.ClientSession() as http:
        key = base64.b64encode(b"/registry/").decode()
        async with http.post(f"{apiserver.etcd_url}/v3/kv/range", json={"key": key}) as r:
            assert r.status == 200, await r.text()
            revision = int((await r.json())["header"]["revision"])
        body = {"revision": str(revision), "physical": True}
        async with http.post(f"{apiserver.etcd_url}/v3/kv/compaction", json=body) as r:
            assert r.status == 200, await r.text()
    return revision


# --- objects, from kubernetes-asyncio's models -------------------------------------------------


class Pods:
    """GPU pods in one namespace. No scheduler or kubelet runs: a test binds and starts them."""

    resource = PODS

    def __init__(self, client: ApiClient, namespace: str) -> None:
        self.core = CoreV1Api(client)
        self.namespace = namespace

    def key(self, name: str) -> str:
        return f"{self.namespace}/{name}"

    async def create(self, name: str, *, gpus: int = 1, cpu: str = "500m") -> V1Pod:
        pod = V1Pod(
            metadata=V1ObjectMeta(name=name),
            spec=V1PodSpec(
                containers=[
                    V1Container(
                        name="main",
                        image="registry.invalid/train:1",
                        # The GPUs as a limit only: the API server requests the same amount.
                        resources=V1ResourceRequirements(
                            requests={"cpu": cpu, "memory": "1Gi"},
                            limits={"nvidia.com/gpu": str(gpus)},
                        ),
                    )
                ]
            ),
        )
        return await self.core.create_namespaced_pod(self.namespace, pod)

    async def modify(self, name: str, queue: str = "research") -> None:
        """A change the model sees: the pod's Kueue queue."""
        pod = await self.core.read_namespaced_pod(name, self.namespace)
        pod.metadata.labels = {**(pod.metadata.labels or {}), QUEUE_LABEL: queue}
        await self.core.replace_namespaced_pod(name, self.namespace, pod)

    async def annotate(self, name: str) -> None:
        """A change the model does not see: new resourceVersion, nothing to emit."""
        pod = await self.core.read_namespaced_pod(name, self.namespace)
        pod.metadata.annotations = {"example.com/touched": "yes"}
        await self.core.replace_namespaced_pod(name, self.namespace, pod)

    async def bind(self, name: str, node: str) -> None:
        binding = V1Binding(
            metadata=V1ObjectMeta(name=name), target=V1ObjectReference(kind="Node", name=node)
        )
        # The server answers with a Status, which the generated client cannot read as a Binding.
        response: Any = await self.core.create_namespaced_pod_binding(
            name, self.namespace, binding, _preload_content=False
        )
        async with response:
            assert response.status == 201, await response.text()

    async def start(self, name: str) -> None:
        pod = await self.core.read_namespaced_pod(name, self.namespace)
        pod.status.phase = "Running"
        await self.core.replace_namespaced_pod_status(name, self.namespace, pod)

    async def delete(self, name: str) -> None:
        await self.core.delete_namespaced_pod(
            name, self.namespace, body=V1DeleteOptions(grace_period_seconds=0)
        )


class Nodes:
    """Node objects (no kubelet behind them), labelled so that only this test's are watched."""

    resource = NODES

    def __init__(self, client: ApiClient, namespace: str) -> None:
        self.core = CoreV1Api(client)
        self.prefix = namespace
        self.selector = self.selector_for(namespace)

    @staticmethod
    def selector_for(namespace: str) -> str:
        return f"gpufrag.test/run={namespace}"

    def key(self, name: str) -> str:
        return f"{self.prefix}-{name}"

    async def create(self, name: str, *, gpus: int = 8, cpu: str = "96") -> V1Node:
        resources = {"cpu": cpu, "memory": "1024Gi", "pods": "110", "nvidia.com/gpu": str(gpus)}
        node = V1Node(
            metadata=V1ObjectMeta(
                name=self.key(name),
                labels={
                    "gpufrag.test/run": self.prefix,
                    "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
                    "nvidia.com/gpu.count": str(gpus),
                },
            ),
            spec=V1NodeSpec(),
            status=V1NodeStatus(capacity=resources, allocatable=dict(resources)),
        )
        return await self.core.create_node(node)

    async def modify(self, name: str) -> None:
        """Cordon it."""
        node = await self.core.read_node(self.key(name))
        node.spec.unschedulable = True
        await self.core.replace_node(self.key(name), node)

    async def delete(self, name: str) -> None:
        await self.core.delete_node(self.key(name))


# --- the source, and a look at its requests -----------------------------------------------------


class Probe:
    """Wraps one reflector's list and watch calls (the real ones still go to the server):
    records each list's outcome and the resourceVersion each watch starts from, and while
    held keeps the next watch from being opened (the stream is down; the cluster moves on)."""

    def __init__(self, reflector: Reflector[Any]) -> None:
        self.lists: list[str] = []
        self.watches: list[str] = []
        self._open = asyncio.Event()
        self._open.set()
        client = reflector.client
        list_page, watch = client.list_page, client.watch

        async def counted_list(*, limit: int, continue_token: str | None) -> Page:
            try:
                page = await list_page(limit=limit, continue_token=continue_token)
            except KubeApiError as exc:
                self.lists.append(f"{type(exc).__name__} {exc.status}")
                raise
            self.lists.append("ok")
            return page

        async def held_watch(*, resource_version: str, timeout_s: int) -> aiohttp.ClientResponse:
            self.watches.append(resource_version)
            await self._open.wait()
            return await watch(resource_version=resource_version, timeout_s=timeout_s)

        client.list_page = counted_list  # type: ignore[method-assign]
        client.watch = held_watch  # type: ignore[method-assign]

    def hold(self) -> None:
        self._open.clear()

    def release(self) -> None:
        self._open.set()


@contextlib.asynccontextmanager
async def watching(
    client: ApiClient,
    settings: KubeSettings,
    collector: Collector,
    registry: CollectorRegistry,
    *,
    refusals: RefusalLog | None = None,
) -> AsyncIterator[tuple[KubeSource, dict[KubeResource, Probe]]]:
    source = KubeSource(
        api_client=client,
        settings=settings,
        emit=collector.emit,
        registry=registry,
        refusals=refusals or RefusalLog(registry=registry),
        rng=random.Random(7),
    )
    probes = {resource: Probe(r) for resource, r in source.reflectors.items()}
    stop = asyncio.Event()
    task = asyncio.create_task(source.run(stop=stop))
    try:
        yield source, probes
    finally:
        stop.set()
        await asyncio.wait_for(task, WAIT_S)


def changes(
    envelopes: list[Envelope], kind: type[PodEvent] | type[NodeEvent]
) -> list[tuple[str, str]]:
    """(change, key) of one kind's envelopes in emission order: "namespace/name" for pods, the
    name for nodes."""
    out: list[tuple[str, str]] = []
    for env in envelopes:
        if isinstance(env.payload, PodEvent) and kind is PodEvent:
            out.append((env.payload.change, env.payload.pod.key))
        elif isinstance(env.payload, NodeEvent) and kind is NodeEvent:
            out.append((env.payload.change, env.payload.node.name))
    return out


def pods_of(envelopes: list[Envelope]) -> list[PodEvent]:
    return [e.payload for e in envelopes if isinstance(e.payload, PodEvent)]


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float:
    return registry.get_sample_value(name, labels) or 0.0


def kube_logs(caplog: pytest.LogCaptureFixture, text: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "connectors.kube" and text in r.getMessage()
    ]


async def until(
    predicate: Callable[[], bool], what: Callable[[], object], timeout: float = WAIT_S
) -> None:
    """Wait for ``predicate``; on timeout, fail showing ``what()`` (the state waited on)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"still not there after {timeout} s: {what()!r}")
        await asyncio.sleep(0.02)
