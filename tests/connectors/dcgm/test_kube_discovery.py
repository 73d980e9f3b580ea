"""Exporter discovery through the Kubernetes API: against the fake API server over real HTTP,
with pods built from kubernetes-asyncio's models, and end to end with the scraper and two real
exporters whose pods come and go."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime

import pytest
from kubernetes_asyncio.client import (
    ApiClient,
    V1Container,
    V1ContainerPort,
    V1ObjectMeta,
    V1Pod,
    V1PodSpec,
    V1PodStatus,
)
from kubernetes_asyncio.client.exceptions import ApiException
from prometheus_client import CollectorRegistry

from connectors.dcgm import Endpoint
from connectors.dcgm.kube_discovery import (
    CHART_SELECTOR,
    OPERATOR_SELECTOR,
    KubeExporterDiscovery,
    pod_endpoint,
)
from connectors.dcgm.scraper import DcgmScraper
from connectors.refusals import RefusalLog
from models import Envelope, GpuSampleEvent
from tests.connectors.dcgm.exporter_server import FakeExporter
from tests.connectors.dcgm.helpers import page
from tests.kube_fake import FakeApiServer, FakeCluster

CLOCK = datetime(2026, 3, 2, 9, 30, tzinfo=UTC)
OPERATOR_LABELS = {"app": "nvidia-dcgm-exporter"}
CHART_LABELS = {"app.kubernetes.io/name": "dcgm-exporter", "app.kubernetes.io/instance": "dcgm"}


def exporter_pod(
    name: str,
    *,
    node: str | None = "gpu-node-1",
    ip: str | None = "10.0.3.7",
    namespace: str = "gpu-operator",
    phase: str = "Running",
    labels: dict[str, str] | None = None,
    ports: list[tuple[str | None, int]] | None = None,
    sidecar_ports: list[tuple[str | None, int]] | None = None,
    deleting: bool = False,
) -> V1Pod:
    """A dcgm-exporter DaemonSet pod as the GPU Operator makes it, unless told otherwise."""

    def container(cname: str, declared: list[tuple[str | None, int]] | None) -> V1Container:
        return V1Container(
            name=cname,
            image="nvcr.io/nvidia/k8s/dcgm-exporter:4.2.3-4.1.3-ubuntu22.04",
            ports=[V1ContainerPort(name=n, container_port=p) for n, p in declared]
            if declared
            else None,
        )

    containers = [
        container("nvidia-dcgm-exporter", [("metrics", 9400)] if ports is None else ports)
    ]
    if sidecar_ports is not None:
        containers.insert(0, container("proxy", sidecar_ports))
    return V1Pod(
        api_version="v1",
        kind="Pod",
        metadata=V1ObjectMeta(
            name=name,
            namespace=namespace,
            labels=OPERATOR_LABELS if labels is None else labels,
            deletion_timestamp=CLOCK if deleting else None,
        ),
        spec=V1PodSpec(containers=containers, node_name=node),
        status=V1PodStatus(phase=phase, pod_ip=ip),
    )


@pytest.fixture
async def cluster() -> AsyncIterator[FakeCluster]:
    c = FakeCluster()
    yield c
    await c.close()


@pytest.fixture
async def server(cluster: FakeCluster) -> AsyncIterator[FakeApiServer]:
    s = FakeApiServer(cluster)
    await s.start()
    yield s
    await s.stop()


@pytest.fixture
async def api_client(server: FakeApiServer) -> AsyncIterator[ApiClient]:
    client = ApiClient(configuration=server.configuration())
    yield client
    await client.close()


def urls(found: object) -> dict[str, str | None]:
    assert isinstance(found, list)
    return {ep.url: ep.node for ep in found}


async def test_the_selector_picks_the_exporter_pods(
    cluster: FakeCluster, server: FakeApiServer, api_client: ApiClient
) -> None:
    cluster.apply(exporter_pod("nvidia-dcgm-exporter-a", node="gpu-a", ip="10.0.3.7"))
    cluster.apply(exporter_pod("nvidia-dcgm-exporter-b", node="gpu-b", ip="10.0.4.9"))
    cluster.apply(
        exporter_pod("dcgm-exporter-x", namespace="monitoring", labels=CHART_LABELS, ip="10.9.0.1")
    )
    cluster.apply(exporter_pod("train-0", namespace="ml", labels={"app": "train"}, ip="10.1.1.1"))

    found = await KubeExporterDiscovery(api_client=api_client).endpoints()
    assert urls(found) == {
        "http://10.0.3.7:9400/metrics": "gpu-a",
        "http://10.0.4.9:9400/metrics": "gpu-b",
    }
    chart = await KubeExporterDiscovery(
        api_client=api_client, label_selector=CHART_SELECTOR
    ).endpoints()
    assert urls(chart) == {"http://10.9.0.1:9400/metrics": "gpu-node-1"}
    # the API server does the selecting, across all namespaces
    assert [(r.path, r.query.get("labelSelector")) for r in server.lists("pods")] == [
        ("/api/v1/pods", OPERATOR_SELECTOR),
        ("/api/v1/pods", CHART_SELECTOR),
    ]


async def test_a_namespace_limits_the_listing(
    cluster: FakeCluster, server: FakeApiServer, api_client: ApiClient
) -> None:
    cluster.apply(exporter_pod("nvidia-dcgm-exporter-a", ip="10.0.3.7"))
    cluster.apply(exporter_pod("nvidia-dcgm-exporter-z", namespace="other", ip="10.0.9.9"))

    found = await KubeExporterDiscovery(api_client=api_client, namespace="gpu-operator").endpoints()
    assert urls(found) == {"http://10.0.3.7:9400/metrics": "gpu-node-1"}
    assert [r.path for r in server.lists("pods")] == ["/api/v1/namespaces/gpu-operator/pods"]


async def test_pods_that_cannot_answer_are_skipped(
    cluster: FakeCluster, api_client: ApiClient
) -> None:
    cluster.apply(exporter_pod("running", ip="10.0.0.1"))
    cluster.apply(exporter_pod("pending", phase="Pending", ip=None, node=None))
    cluster.apply(exporter_pod("starting", ip=None))  # Running, IP not reported yet
    cluster.apply(exporter_pod("terminating", ip="10.0.0.2", deleting=True))
    cluster.apply(exporter_pod("failed", phase="Failed", ip="10.0.0.3"))
    cluster.apply(exporter_pod("done", phase="Succeeded", ip="10.0.0.4"))
    cluster.apply(exporter_pod("unknown", phase="Unknown", ip="10.0.0.5"))

    found = await KubeExporterDiscovery(api_client=api_client).endpoints()
    assert urls(found) == {"http://10.0.0.1:9400/metrics": "gpu-node-1"}


async def test_the_port_is_the_named_one_else_the_first_else_the_fallback(
    cluster: FakeCluster, api_client: ApiClient
) -> None:
    cluster.apply(
        exporter_pod(
            "named",
            ip="10.0.0.1",
            ports=[("health", 8080), ("metrics", 9500)],
            sidecar_ports=[("https", 8443)],
        )
    )
    cluster.apply(exporter_pod("unnamed", ip="10.0.0.2", ports=[(None, 9401), ("debug", 6060)]))
    cluster.apply(exporter_pod("portless", ip="10.0.0.3", ports=[]))

    found = await KubeExporterDiscovery(api_client=api_client).endpoints()
    assert set(urls(found)) == {
        "http://10.0.0.1:9500/metrics",
        "http://10.0.0.2:9401/metrics",
        "http://10.0.0.3:9400/metrics",
    }
    other = await KubeExporterDiscovery(api_client=api_client, fallback_port=19400).endpoints()
    assert "http://10.0.0.3:19400/metrics" in urls(other)


async def test_an_ipv6_pod_address_is_bracketed(
    cluster: FakeCluster, api_client: ApiClient
) -> None:
    cluster.apply(exporter_pod("v6", ip="fd00:10:244::1c", node="gpu-v6"))
    found = await KubeExporterDiscovery(api_client=api_client).endpoints()
    assert urls(found) == {"http://[fd00:10:244::1c]:9400/metrics": "gpu-v6"}


async def test_a_large_daemonset_is_listed_in_pages(
    cluster: FakeCluster, server: FakeApiServer, api_client: ApiClient
) -> None:
    for i in range(5):
        cluster.apply(exporter_pod(f"exp-{i}", ip=f"10.0.0.{i + 1}", node=f"gpu-{i}"))
    found = await KubeExporterDiscovery(api_client=api_client, page_size=2).endpoints()
    assert urls(found) == {f"http://10.0.0.{i + 1}:9400/metrics": f"gpu-{i}" for i in range(5)}
    assert [r.query.get("limit") for r in server.lists("pods")] == ["2", "2", "2"]


async def test_api_errors_raise_for_the_scraper_to_count(
    cluster: FakeCluster, server: FakeApiServer, api_client: ApiClient
) -> None:
    cluster.apply(exporter_pod("a"))
    discovery = KubeExporterDiscovery(api_client=api_client, request_timeout_s=2.0)
    server.faults.fail_status = 403
    server.faults.fail_lists = 1
    with pytest.raises(ApiException) as forbidden:
        await discovery.endpoints()
    assert forbidden.value.status == 403
    unauthorized = ApiClient(configuration=server.configuration(token="wrong"))
    try:
        with pytest.raises(ApiException) as denied:
            await KubeExporterDiscovery(api_client=unauthorized).endpoints()
        assert denied.value.status == 401
    finally:
        await unauthorized.close()
    await server.stop()
    with pytest.raises(OSError):  # aiohttp's connection errors are OSErrors
        await discovery.endpoints()


async def test_no_matching_pod_is_said_once_per_spell(
    cluster: FakeCluster, api_client: ApiClient, caplog: pytest.LogCaptureFixture
) -> None:
    discovery = KubeExporterDiscovery(api_client=api_client)
    with caplog.at_level(logging.WARNING, logger="connectors.dcgm.kube_discovery"):
        assert await discovery.endpoints() == []
        assert await discovery.endpoints() == []
        cluster.apply(exporter_pod("a"))
        assert len(await discovery.endpoints()) == 1
        cluster.delete("pods", "a", "gpu-operator")
        assert await discovery.endpoints() == []
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 2
    assert CHART_SELECTOR in warnings[0]


def test_options_are_checked() -> None:
    with pytest.raises(ValueError, match="label_selector"):
        KubeExporterDiscovery(api_client=None, label_selector=" ")
    with pytest.raises(ValueError, match="fallback_port"):
        KubeExporterDiscovery(api_client=None, fallback_port=0)
    with pytest.raises(ValueError, match="request_timeout_s"):
        KubeExporterDiscovery(api_client=None, request_timeout_s=0)
    with pytest.raises(ValueError, match="page_size"):
        KubeExporterDiscovery(api_client=None, page_size=0)


# --- end to end: the scraper following the pods ------------------------------------------


class Sink:
    def __init__(self) -> None:
        self.envs: list[Envelope] = []

    async def __call__(self, env: Envelope) -> None:
        self.envs.append(env)

    def nodes_by_uuid(self) -> dict[str | None, str]:
        out: dict[str | None, str] = {}
        for env in self.envs:
            assert isinstance(env.payload, GpuSampleEvent)
            out[env.payload.sample.uuid] = env.payload.sample.node
        return out


async def until(cond: Callable[[], bool], *, within_s: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + within_s
    while not cond():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.005)


def without_hostname(body: bytes) -> bytes:
    """The page of an exporter run with ``--no-hostname``: the node must come from the pod."""
    return re.sub(rb',Hostname="[^"]*"', b"", body)


async def test_the_scraper_follows_the_exporter_pods(
    cluster: FakeCluster, server: FakeApiServer, api_client: ApiClient
) -> None:
    legacy = FakeExporter(page("legacy_old_namespace.txt"))  # 2.x: never had a Hostname label
    h100 = FakeExporter(without_hostname(page("xid_h100.txt")))
    assert b"Hostname" not in h100.body
    await legacy.start()
    await h100.start()
    cluster.apply(
        exporter_pod(
            "exporter-t4", node="gpu-t4-03", ip="127.0.0.1", ports=[("metrics", legacy.port)]
        )
    )
    cluster.apply(
        exporter_pod("exporter-h100", node="gpu-h100-12", ip="127.0.0.1", ports=[(None, h100.port)])
    )
    reg, sink = CollectorRegistry(), Sink()
    scraper = DcgmScraper(
        discovery=KubeExporterDiscovery(api_client=api_client, request_timeout_s=2.0),
        emit=sink,
        registry=reg,
        refusals=RefusalLog(),
        discovery_interval_s=0.3,
        interval_s=0.02,
        timeout_s=2.0,
        backoff_initial_s=0.02,
        backoff_max_s=0.08,
        now=lambda: CLOCK,
    )

    def emitted(url: str) -> float | None:
        return reg.get_sample_value("gpufrag_dcgm_samples_emitted_total", {"endpoint": url})

    def discovery_errors() -> float:
        return reg.get_sample_value("gpufrag_dcgm_discovery_errors_total") or 0.0

    stop = asyncio.Event()
    task = asyncio.create_task(scraper.run(stop=stop))
    try:
        await until(lambda: legacy.hits >= 2 and h100.hits >= 2)
        by_uuid = sink.nodes_by_uuid()
        assert by_uuid["GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52"] == "gpu-t4-03"
        assert by_uuid["GPU-0d8e2b6a-71f3-4c59-a8d4-e6b93f20c517"] == "gpu-h100-12"
        assert set(by_uuid.values()) == {"gpu-t4-03", "gpu-h100-12"}

        # the API server refusing a listing: counted, and the last set is still scraped
        errors_before = discovery_errors()
        server.faults.fail_status = 403
        server.faults.fail_lists = 1
        await until(lambda: discovery_errors() > errors_before)
        hits = legacy.hits, h100.hits
        await until(lambda: legacy.hits > hits[0] and h100.hits > hits[1])

        # the H100 node's exporter pod goes away: its endpoint is retired, the other stays
        cluster.delete("pods", "exporter-h100", "gpu-operator")
        await until(lambda: emitted(f"http://127.0.0.1:{h100.port}/metrics") is None)
        legacy_at = legacy.hits
        # a request sent just before the retirement may still land: let one more round pass
        await until(lambda: legacy.hits >= legacy_at + 1)
        gone_at, legacy_at = h100.hits, legacy.hits
        await until(lambda: legacy.hits >= legacy_at + 3)
        assert h100.hits == gone_at
        assert (emitted(f"http://127.0.0.1:{legacy.port}/metrics") or 0) > 0
    finally:
        stop.set()
        await asyncio.wait_for(task, 5)
        await legacy.stop()
        await h100.stop()
    assert not task.exception()


def test_a_pod_model_maps_without_an_api_server() -> None:
    pod = exporter_pod("a", ip="10.0.3.7", node="gpu-a")
    assert pod_endpoint(pod) == Endpoint("http://10.0.3.7:9400/metrics", node="gpu-a")
    assert pod_endpoint(exporter_pod("b", node=None)) == Endpoint("http://10.0.3.7:9400/metrics")
    assert pod_endpoint(V1Pod(metadata=V1ObjectMeta(name="bare"))) is None
