"""The watchers against a real kube-apiserver (deploy/local/apiserver.sh, the `apiserver` session
fixture): objects are created, changed and deleted through kubernetes-asyncio's API from its
models, each test in its own namespace, and what KubeSource emits is compared with what happened.

apiserver.sh serves pods without the watch cache (`--watch-cache-sizes pods#0`): a pod watch
reads etcd's history, so compacting etcd makes an old resourceVersion answer 410 Gone, as a long
disconnection does in a real cluster. Nodes go through the watch cache, the usual path.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import random
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio.client import (
    ApiClient,
    CoreV1Api,
    V1Binding,
    V1Container,
    V1DeleteOptions,
    V1Namespace,
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

from connectors.kube import KubeSource, Reflector, api_client_for
from connectors.kube.api import KubeApiError, Page
from models import Envelope, KubeResource, KubeSettings, NodeEvent, PodEvent, PodPhase
from tests.connectors.kube.helpers import Collector, kube_settings
from tests.local_apiserver import ApiServer

pytestmark = pytest.mark.apiserver

PODS, NODES = KubeResource.PODS, KubeResource.NODES
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
WAIT_S = 10.0
"""Upper bound for anything the server should do promptly (a 2-core CI machine, busy)."""


# --- the real server ------------------------------------------------------------------------


@pytest.fixture
async def client(
    apiserver: ApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[ApiClient]:
    """An API client made the way the watchers make theirs: from a kubeconfig (TLS verified
    against the server's CA, bearer token)."""
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "local",
                        "cluster": {
                            "server": apiserver.url,
                            "certificate-authority": str(apiserver.ca_cert),
                        },
                    }
                ],
                "users": [{"name": "admin", "user": {"token": apiserver.token}}],
                "contexts": [{"name": "local", "context": {"cluster": "local", "user": "admin"}}],
                "current-context": "local",
            }
        )
    )
    api = await api_client_for(KubeSettings(kubeconfig=str(kubeconfig)))
    yield api
    await api.close()


@pytest.fixture
async def namespace(client: ApiClient) -> AsyncIterator[str]:
    name = f"gpufrag-{uuid.uuid4().hex[:10]}"
    core = CoreV1Api(client)
    await core.create_namespace(V1Namespace(metadata=V1ObjectMeta(name=name)))
    yield name
    # No namespace controller runs: the namespace stays Terminating with its pods in it.
    await core.delete_namespace(name)


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

    async def create(self, name: str, *, gpus: int = 1) -> V1Pod:
        pod = V1Pod(
            metadata=V1ObjectMeta(name=name),
            spec=V1PodSpec(
                containers=[
                    V1Container(
                        name="main",
                        image="registry.invalid/train:1",
                        # The GPUs as a limit only: the API server requests the same amount.
                        resources=V1ResourceRequirements(
                            requests={"cpu": "500m", "memory": "1Gi"},
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

    async def create(self, name: str, *, gpus: int = 8) -> V1Node:
        resources = {"cpu": "96", "memory": "1024Gi", "pods": "110", "nvidia.com/gpu": str(gpus)}
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
) -> AsyncIterator[tuple[KubeSource, dict[KubeResource, Probe]]]:
    source = KubeSource(
        api_client=client,
        settings=settings,
        emit=collector.emit,
        registry=registry,
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


# --- the tests ------------------------------------------------------------------------------


async def test_list_then_watch_emits_each_change_once_in_order(
    client: ApiClient, namespace: str
) -> None:
    pods, nodes = Pods(client, namespace), Nodes(client, namespace)
    a = await pods.create("a", gpus=1)
    await pods.create("b", gpus=2)
    await nodes.create("n1", gpus=8)
    collector, registry = Collector(), CollectorRegistry()
    settings = kube_settings(
        PODS, NODES, namespace=namespace, label_selectors={NODES: nodes.selector}
    )
    async with watching(client, settings, collector, registry) as (source, probes):
        await until(lambda: len(collector.envelopes) == 3, lambda: collector.envelopes)
        # Both watching now.
        await until(lambda: all(p.watches for p in probes.values()), lambda: probes)
        await pods.bind("a", nodes.key("n1"))
        await pods.start("a")
        c = await pods.create("c", gpus=4)
        await pods.delete("b")
        await nodes.modify("n1")
        await nodes.delete("n1")
        await until(lambda: len(collector.envelopes) == 9, lambda: collector.envelopes)
        await collector.quiet(0.5)
        held = {r: len(x.store) for r, x in source.reflectors.items()}

    assert changes(collector.envelopes, PodEvent) == [
        ("upsert", pods.key("a")),
        ("upsert", pods.key("b")),
        ("upsert", pods.key("a")),  # bound to n1
        ("upsert", pods.key("a")),  # running
        ("upsert", pods.key("c")),
        ("delete", pods.key("b")),
    ]
    assert changes(collector.envelopes, NodeEvent) == [
        ("upsert", nodes.key("n1")),
        ("upsert", nodes.key("n1")),  # cordoned
        ("delete", nodes.key("n1")),
    ]
    first_a, first_b, bound, running, created_c, _ = pods_of(collector.envelopes)
    assert first_a.pod.uid == a.metadata.uid and created_c.pod.uid == c.metadata.uid
    # The server defaulted the GPU request from the limit, as the mapping assumes.
    assert c.spec.containers[0].resources.requests["nvidia.com/gpu"] == "4"
    assert first_a.pod.node is None and first_a.pod.phase is PodPhase.PENDING
    assert (first_a.pod.requests.gpu_count, first_a.pod.requests.gpu_milli) == (1, 1000)
    assert first_b.pod.requests.gpu_count == 2
    assert (first_b.pod.requests.cpu_milli, first_b.pod.requests.memory_mib) == (500, 1024)
    assert bound.pod.node == nodes.key("n1") and bound.pod.phase is PodPhase.PENDING
    assert running.pod.node == nodes.key("n1") and running.pod.phase is PodPhase.RUNNING
    assert created_c.pod.requests.gpu_count == 4
    node_events = [e.payload for e in collector.envelopes if isinstance(e.payload, NodeEvent)]
    listed, cordoned, _ = node_events
    assert (listed.node.gpu_model, listed.node.gpu_count) == ("A100-80GB", 8)
    assert (listed.node.cpu_milli, listed.node.memory_mib) == (96_000, 1024 * 1024)
    assert not listed.node.unschedulable and cordoned.node.unschedulable
    assert all(env.source == "kube" for env in collector.envelopes)
    assert held == {PODS: 2, NODES: 0}  # a and c
    for resource in (PODS, NODES):
        assert probes[resource].lists == ["ok"]
        assert sample(registry, "gpufrag_kube_relists_total", resource=resource.value) == 1


@pytest.mark.parametrize("resource", [PODS, NODES], ids=["pods-from-etcd", "nodes-cached"])
async def test_dropped_watch_resumes_without_duplicates(
    client: ApiClient, namespace: str, resource: KubeResource
) -> None:
    objects = Pods(client, namespace) if resource is PODS else Nodes(client, namespace)
    kind = PodEvent if resource is PODS else NodeEvent
    await objects.create("a")
    collector, registry = Collector(), CollectorRegistry()
    # Each watch asks the server to end it after 1 s (timeoutSeconds): streams keep ending.
    settings = kube_settings(
        resource,
        namespace=namespace,
        label_selectors={NODES: Nodes.selector_for(namespace)},
        watch_timeout_s=0.5,
    )
    async with watching(client, settings, collector, registry) as (source, probes):
        reflector, probe = source.reflectors[resource], probes[resource]
        await until(
            lambda: len(collector.envelopes) == 1 and len(probe.watches) == 1,
            lambda: (collector.envelopes, probe.watches),
        )
        await objects.create("b")
        await objects.modify("a")
        await until(lambda: len(collector.envelopes) == 3, lambda: collector.envelopes)
        # The server ends this stream; keep the next watch from opening while the cluster moves.
        held_at = len(probe.watches)
        probe.hold()
        await until(lambda: len(probe.watches) == held_at + 1, lambda: probe.watches)
        resumed_from = probe.watches[held_at]
        await objects.create("c")
        await objects.modify("b")
        await objects.delete("a")
        probe.release()
        await until(
            lambda: len(collector.envelopes) == 6, lambda: changes(collector.envelopes, kind)
        )
        # More streams ended by the server and resumed.
        await until(lambda: len(probe.watches) >= held_at + 3, lambda: probe.watches)
        await collector.quiet(0.3)
        last_rv = reflector.resource_version

    assert changes(collector.envelopes, kind) == [
        ("upsert", objects.key("a")),
        ("upsert", objects.key("b")),
        ("upsert", objects.key("a")),
        ("upsert", objects.key("c")),
        ("upsert", objects.key("b")),
        ("delete", objects.key("a")),
    ]
    # Resumed from the version of the last change it had seen, not the list's; never re-listed.
    assert resumed_from != probe.watches[0]
    assert int(resumed_from) > int(probe.watches[0])
    assert probe.lists == ["ok"]
    assert sample(registry, "gpufrag_kube_relists_total", resource=resource.value) == 1
    assert (
        sample(registry, "gpufrag_kube_errors_total", resource=resource.value, reason="gone") == 0
    )
    assert last_rv is not None and int(last_rv) >= int(resumed_from)


async def test_relist_after_410_yields_exactly_the_missed_changes(
    apiserver: ApiServer,
    client: ApiClient,
    namespace: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="connectors.kube")
    pods = Pods(client, namespace)
    for name in ("a", "b", "c"):
        await pods.create(name)
    collector, registry = Collector(), CollectorRegistry()
    settings = kube_settings(PODS, namespace=namespace, watch_timeout_s=0.5)
    async with watching(client, settings, collector, registry) as (source, probes):
        reflector, probe = source.reflectors[PODS], probes[PODS]
        await until(
            lambda: len(collector.envelopes) == 3 and len(probe.watches) == 1,
            lambda: (collector.envelopes, probe.watches),
        )
        await pods.create("d")  # seen in the first stream
        await until(lambda: len(collector.envelopes) == 4, lambda: collector.envelopes)
        # The stream ends and the reflector waits to reconnect while the cluster moves on...
        held_at = len(probe.watches)
        probe.hold()
        await until(lambda: len(probe.watches) == held_at + 1, lambda: probe.watches)
        stale = probe.watches[held_at]
        mark = len(collector.envelopes)
        await pods.bind("a", "n1")  # changed
        await pods.delete("b")  # deleted
        await pods.create("e", gpus=2)  # added
        await pods.annotate("c")  # new resourceVersion, same model: nothing to say
        await pods.create("tmp")  # added and deleted while away: nothing to say
        await pods.delete("tmp")
        # ...and the server forgets that history.
        compacted = await compact_etcd(apiserver)
        assert compacted > int(stale) + 1
        probe.release()
        await until(
            lambda: len(probe.lists) == 2,
            lambda: f"no re-list after 410 (is the pod watch cache off, pods#0?): {probe.lists}",
        )
        await until(
            lambda: len(collector.envelopes) >= mark + 3,
            lambda: changes(collector.since(mark), PodEvent),
        )
        await collector.quiet(0.5)
        missed = changes(collector.since(mark), PodEvent)
        # The watch goes on from the re-list's version.
        mark = len(collector.envelopes)
        await pods.create("f")
        await until(lambda: len(collector.envelopes) == mark + 1, lambda: collector.since(mark))
        await collector.quiet(0.3)
        after = changes(collector.since(mark), PodEvent)
        held = {key: entry.rv for key, entry in reflector.store.items()}
        live = await pods.core.list_namespaced_pod(namespace)

    assert missed == [
        ("delete", pods.key("b")),
        ("upsert", pods.key("a")),
        ("upsert", pods.key("e")),
    ], "re-list after 410 (apiserver.sh must serve pods without the watch cache: pods#0)"
    bound = pods_of(collector.envelopes)[5]
    assert bound.pod.node == "n1"
    assert after == [("upsert", pods.key("f"))]
    assert probe.lists == ["ok", "ok"]
    assert held == {p.metadata.uid: p.metadata.resource_version for p in live.items}
    assert sample(registry, "gpufrag_kube_errors_total", resource="pods", reason="gone") == 1
    assert sample(registry, "gpufrag_kube_relists_total", resource="pods") == 2
    gone = kube_logs(caplog, "re-listing")
    assert len(gone) == 1 and "too old" in gone[0], gone


async def test_missing_crd_is_skipped_with_one_log_line_and_no_hot_loop(
    client: ApiClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="connectors.kube")
    collector, registry = Collector(), CollectorRegistry()
    missing = (KubeResource.KUEUE_WORKLOADS, KubeResource.VOLCANO_QUEUES)
    settings = kube_settings(*missing, missing_recheck_s=0.5)
    async with watching(client, settings, collector, registry) as (source, probes):
        await until(
            lambda: all(r.synced.is_set() for r in source.reflectors.values()), lambda: probes
        )
        await asyncio.sleep(2.0)
        assert all(r.missing for r in source.reflectors.values())
    for resource in missing:
        asked = probes[resource].lists
        # Asked every 0.5 s for 2 s: 4 or 5 times, each answered 404; never watched.
        assert 3 <= len(asked) <= 6, asked
        assert set(asked) == {"NotServed 404"}
        assert probes[resource].watches == []
        assert len(kube_logs(caplog, f"{resource.value}: ")) == 1
        assert sample(registry, "gpufrag_kube_resource_missing", resource=resource.value) == 1
    assert collector.envelopes == []
