"""One object the watchers cannot handle is skipped and counted; every other object of the
resource is still emitted, on the initial list and while watching, and the watch is not
restarted because of it (a progress note on issue 11: the reflector's part)."""

from __future__ import annotations

import pytest
from kubernetes_asyncio.client import ApiClient
from prometheus_client import CollectorRegistry

from connectors.kube.quantity import QuantityError, parse_quantity
from models import KubeResource, NodeEvent, PodEvent
from tests.connectors.kube.helpers import Collector, kube_settings, running
from tests.kube_fake import FakeApiServer, FakeCluster
from tests.kube_fake.objects import container, node, pod

# A valid Kubernetes quantity: 10^17 cores. It passes every validator and overflows only when
# the event is serialised (more than 64 bits of milli-CPU).
ABSURD_CPU = "100000000000000000"


def absurd_pod(name: str) -> object:
    requests = {"cpu": ABSURD_CPU, "memory": "1Gi"}
    return pod(name, containers=[container(requests=requests, limits=dict(requests))])


def emitted_pods(collector: Collector) -> list[str]:
    return [env.payload.pod.key for env in collector.envelopes if isinstance(env.payload, PodEvent)]


def failures(registry: CollectorRegistry, resource: str) -> float:
    total = 0.0
    for metric in registry.collect():
        for sample in metric.samples:
            if (
                sample.name == "gpufrag_kube_errors_total"
                and sample.labels.get("resource") == resource
                and sample.labels.get("reason", "").startswith("object:")
            ):
                total += sample.value
    return total


async def test_one_absurd_pod_neither_hides_the_others_nor_restarts_the_watch(
    cluster: FakeCluster, server: FakeApiServer, api_client: ApiClient, collector: Collector
) -> None:
    cluster.apply(pod("a", gpus=1))
    cluster.apply(absurd_pod("big"))
    cluster.apply(pod("c", gpus=2))
    registry = CollectorRegistry()
    settings = kube_settings(KubeResource.PODS)
    async with running(api_client, settings, collector, registry=registry):
        await collector.wait_for(lambda: len(emitted_pods(collector)) == 2, timeout=30)
        cluster.apply(absurd_pod("big-2"))
        cluster.apply(pod("d", gpus=1))
        await collector.wait_for(lambda: "ml/d" in emitted_pods(collector), timeout=30)
        await collector.quiet()
        assert failures(registry, "pods") == 2
    assert emitted_pods(collector) == ["ml/a", "ml/c", "ml/d"]
    assert len(server.lists("pods")) == 1  # never re-listed because of the bad pods
    assert len(server.watches("pods")) == 1  # and the watch went on


async def test_one_absurd_node_does_not_hide_the_others(
    cluster: FakeCluster, server: FakeApiServer, api_client: ApiClient, collector: Collector
) -> None:
    cluster.apply(node("n1"))
    cluster.apply(node("n-big", cpu=ABSURD_CPU))
    cluster.apply(node("n3"))
    registry = CollectorRegistry()
    settings = kube_settings(KubeResource.NODES)
    async with running(api_client, settings, collector, registry=registry):
        names = lambda: [  # noqa: E731
            e.payload.node.name for e in collector.envelopes if isinstance(e.payload, NodeEvent)
        ]
        await collector.wait_for(lambda: len(names()) == 2, timeout=30)
        cluster.apply(node("n4"))
        await collector.wait_for(lambda: "n4" in names(), timeout=30)
        assert failures(registry, "nodes") == 1
    assert sorted(names()) == ["n1", "n3", "n4"]
    assert len(server.lists("nodes")) == 1


def test_a_quantity_past_decimal_range_is_refused_as_not_a_quantity() -> None:
    with pytest.raises(QuantityError, match="not a quantity"):
        parse_quantity("1e999999999E")  # Decimal's Overflow, not a crash of the reflector
