"""One object the watchers cannot handle is refused (counted by source and reason, kept as a
dead letter with its raw form); every other object of the resource is still emitted, on the
initial list and while watching, and neither a re-list nor a re-watch happens because of it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes_asyncio.client import ApiClient
from prometheus_client import CollectorRegistry

from connectors.kube.quantity import QuantityError, parse_quantity
from connectors.refusals import RefusalLog
from models import KubeResource, NodeEvent, PodEvent
from tests.connectors.kube.helpers import Collector, Kept, kube_settings, running
from tests.kube_fake import FakeApiServer, FakeCluster
from tests.kube_fake.objects import container, node, oom_status, pod

# A valid Kubernetes quantity: 10^17 cores. It passes the API server's validation and, before
# the models had bounds, overflowed only when the event was serialised (past 64 bits).
ABSURD_CPU = "100000000000000000"


def absurd_pod(name: str) -> object:
    requests = {"cpu": ABSURD_CPU, "memory": "1Gi"}
    return pod(name, containers=[container(requests=requests, limits=dict(requests))])


def undecodable_pod(name: str) -> dict[str, Any]:
    # kubernetes-asyncio refuses to build a V1Pod with this timestamp (ApiException)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ml", "creationTimestamp": "not-a-date"},
        "spec": {"containers": [{"name": "main", "image": "x"}]},
    }


def emitted_pods(collector: Collector) -> list[str]:
    return [env.payload.pod.key for env in collector.envelopes if isinstance(env.payload, PodEvent)]


async def test_one_absurd_pod_neither_hides_the_others_nor_restarts_the_watch(
    cluster: FakeCluster, server: FakeApiServer, api_client: ApiClient, collector: Collector
) -> None:
    cluster.apply(pod("a", gpus=1))
    cluster.apply(absurd_pod("big"))
    cluster.apply(pod("c", gpus=2))
    registry, kept = CollectorRegistry(), Kept()
    refusals = RefusalLog(registry=registry, sink=kept)
    settings = kube_settings(KubeResource.PODS)
    async with running(api_client, settings, collector, registry=registry, refusals=refusals):
        await collector.wait_for(lambda: len(emitted_pods(collector)) == 2, timeout=30)
        cluster.apply(absurd_pod("big-2"))
        cluster.apply(pod("d", gpus=1))
        await collector.wait_for(lambda: "ml/d" in emitted_pods(collector), timeout=30)
        await collector.quiet()
    assert emitted_pods(collector) == ["ml/a", "ml/c", "ml/d"]
    assert refusals.counts == {("kube/pods", "mapping"): 2}
    assert (
        registry.get_sample_value(
            "gpufrag_refused_total", {"source": "kube/pods", "reason": "mapping"}
        )
        == 2
    )
    assert [r.detail.split(" ")[0] for r in kept.refusals] == ["ml/big", "ml/big-2"]
    assert all("cpu_milli" in r.detail and "4096000" in r.detail for r in kept.refusals)
    assert all(ABSURD_CPU in r.raw for r in kept.refusals)  # the raw object is kept
    assert len(server.lists("pods")) == 1  # never re-listed because of the bad pods
    assert len(server.watches("pods")) == 1  # and the watch went on


async def test_an_item_the_client_cannot_decode_costs_only_itself(
    cluster: FakeCluster, server: FakeApiServer, api_client: ApiClient, collector: Collector
) -> None:
    cluster.apply(pod("a", gpus=1))
    cluster.apply(undecodable_pod("garbled"))
    cluster.apply(pod("c", gpus=1))
    kept = Kept()
    refusals = RefusalLog(registry=CollectorRegistry(), sink=kept)
    # page_size 2: the bad item shares its list page with a good one
    settings = kube_settings(KubeResource.PODS, page_size=2)
    async with running(api_client, settings, collector, refusals=refusals):
        await collector.wait_for(lambda: len(emitted_pods(collector)) == 2, timeout=30)
        await collector.wait_for(lambda: bool(cluster.subscribers), timeout=30)  # watching
        cluster.apply(undecodable_pod("garbled-2"))
        cluster.send_raw(b'{"type": "ADDED", "object": [1, 2]\n')  # not JSON at all
        cluster.send_raw(b'"just a string"\n')
        # 600 levels: JSON reads it, but past the 254 orjson writes, and deep enough for a
        # plain repr of it to hit Python's recursion limit
        deep = b'{"a":' * 600 + b"1" + b"}" * 600
        meta = b'{"name":"deep","namespace":"ml","uid":"d-1","resourceVersion":"9000"}'
        cluster.send_raw(
            b'{"type":"ADDED","object":{"metadata":' + meta + b',"spec":' + deep + b"}}\n"
        )
        cluster.apply(pod("d", gpus=1))
        await collector.wait_for(lambda: "ml/d" in emitted_pods(collector), timeout=30)
    assert emitted_pods(collector) == ["ml/a", "ml/c", "ml/d"]
    assert refusals.counts == {
        ("kube/pods", "undecodable"): 3,
        ("kube/pods", "unreadable_event"): 2,
    }
    undecodable = [r for r in kept.refusals if r.reason == "undecodable"]
    names = [r.detail.split(" ")[0] for r in undecodable]
    assert sorted(names) == ["ml/deep", "ml/garbled", "ml/garbled-2"]
    assert all("not-a-date" in r.raw for r in undecodable if r.detail.startswith("ml/garbled"))
    assert len(server.lists("pods")) == 2  # one list of two pages: no re-list
    assert "continue" in server.lists("pods")[1].query
    assert len(server.watches("pods")) == 1


async def test_one_absurd_node_does_not_hide_the_others(
    cluster: FakeCluster, server: FakeApiServer, api_client: ApiClient, collector: Collector
) -> None:
    cluster.apply(node("n1"))
    cluster.apply(node("n-big", cpu=ABSURD_CPU))
    cluster.apply(node("n3"))
    refusals = RefusalLog(registry=CollectorRegistry())
    settings = kube_settings(KubeResource.NODES)
    async with running(api_client, settings, collector, refusals=refusals):
        names = lambda: [  # noqa: E731
            e.payload.node.name for e in collector.envelopes if isinstance(e.payload, NodeEvent)
        ]
        await collector.wait_for(lambda: len(names()) == 2, timeout=30)
        cluster.apply(node("n4"))
        await collector.wait_for(lambda: "n4" in names(), timeout=30)
    assert sorted(names()) == ["n1", "n3", "n4"]
    assert refusals.counts == {("kube/nodes", "mapping"): 1}
    assert refusals.last is not None and refusals.last.detail.startswith("n-big ")
    assert len(server.lists("nodes")) == 1


@pytest.mark.parametrize(
    ("quantity", "problem"),
    [
        ("1e999999999E", "not a quantity"),  # Decimal's Overflow, not a crash of the reflector
        ("1e31", "past any real resource"),  # valid, but an int of it would be pointless work
    ],
)
def test_quantities_past_any_resource_are_refused(quantity: str, problem: str) -> None:
    with pytest.raises(QuantityError, match=problem):
        parse_quantity(quantity)


async def test_a_bad_oom_kill_time_costs_the_kill_not_the_pod(
    cluster: FakeCluster, server: FakeApiServer, api_client: ApiClient, collector: Collector
) -> None:
    ancient = datetime(1960, 1, 1, tzinfo=UTC)  # before any clock the store keeps
    oomed = pod(
        "oomed",
        gpus=1,
        node="n1",
        phase="Running",
        container_statuses=[
            oom_status("main", restarts=1, finished=ancient, container_id="containerd://c1")
        ],
    )
    cluster.apply(oomed)
    refusals = RefusalLog(registry=CollectorRegistry())
    async with running(api_client, kube_settings(KubeResource.PODS), collector, refusals=refusals):
        await collector.wait_for(lambda: emitted_pods(collector) == ["ml/oomed"], timeout=30)
    assert refusals.counts == {("kube/pods", "mapping"): 1}
    assert refusals.last is not None and "OOM kill of main" in refusals.last.detail


async def test_a_negative_request_is_refused_not_netted_against_another(
    cluster: FakeCluster, server: FakeApiServer, api_client: ApiClient, collector: Collector
) -> None:
    plus = {"cpu": "4", "memory": "8Gi", "nvidia.com/gpu": "2"}
    minus = {"cpu": "-3", "memory": "-4Gi", "nvidia.com/gpu": "-1"}
    both = [container("a", requests=plus), container("b", requests=minus)]
    cluster.apply(pod("netted", containers=both))
    cluster.apply(pod("fine", gpus=1))
    refusals = RefusalLog(registry=CollectorRegistry())
    async with running(api_client, kube_settings(KubeResource.PODS), collector, refusals=refusals):
        await collector.wait_for(lambda: emitted_pods(collector) == ["ml/fine"], timeout=30)
    assert refusals.counts == {("kube/pods", "mapping"): 1}
    assert refusals.last is not None and "is negative" in refusals.last.detail
