"""Issue 11's acceptance against the real kube-apiserver: one object with an absurd but
API-valid quantity (10^17 cores; the server accepts it) among good ones, on the initial list
and again created while watching. Every good object is emitted, the bad one is refused
(counted by source and reason, dead-lettered with its raw form), and neither the list nor the
watch is restarted because of it."""

from __future__ import annotations

import pytest
from kubernetes_asyncio.client import ApiClient
from prometheus_client import CollectorRegistry

from connectors.refusals import RefusalLog
from models import KubeResource, NodeEvent, PodEvent
from models.refusal import Refusal
from tests.connectors.kube.helpers import Collector, kube_settings
from tests.connectors.kube.real_apiserver import NODES, PODS, Nodes, Pods, sample, until, watching

# one worker under pytest-xdist, one test at a time: compacting etcd (test_relist_after_410...)
# makes any pod watch reopened from an older resourceVersion answer 410 Gone, which these
# files' tests count as a re-list
pytestmark = [pytest.mark.apiserver, pytest.mark.xdist_group("etcd-compaction")]

ABSURD_CPU = "100000000000000000"


def emitted(collector: Collector, resource: KubeResource) -> list[str]:
    out = []
    for env in collector.envelopes:
        if resource is PODS and isinstance(env.payload, PodEvent):
            out.append(env.payload.pod.key)
        elif resource is NODES and isinstance(env.payload, NodeEvent):
            out.append(env.payload.node.name)
    return out


@pytest.mark.parametrize("resource", [PODS, NODES], ids=["pods", "nodes"])
async def test_an_absurd_object_is_refused_and_the_rest_of_the_resource_goes_on(
    client: ApiClient, namespace: str, resource: KubeResource
) -> None:
    objects = Pods(client, namespace) if resource is PODS else Nodes(client, namespace)
    for name in ("good-1", "good-2"):
        await objects.create(name)
    await objects.create("bad-1", cpu=ABSURD_CPU)
    await objects.create("good-3")
    kept: list[Refusal] = []
    collector, registry = Collector(), CollectorRegistry()
    refusals = RefusalLog(registry=registry, sink=kept.append)
    settings = kube_settings(
        resource, namespace=namespace, label_selectors={NODES: Nodes.selector_for(namespace)}
    )
    good = [objects.key(n) for n in ("good-1", "good-2", "good-3")]
    async with watching(client, settings, collector, registry, refusals=refusals) as (_, probes):
        await until(lambda: emitted(collector, resource) == good, lambda: collector.envelopes)
        await until(lambda: bool(probes[resource].watches), lambda: probes)
        await objects.create("bad-2", cpu=ABSURD_CPU)
        await objects.create("good-4")
        await objects.create("good-5")
        good += [objects.key("good-4"), objects.key("good-5")]
        await until(lambda: emitted(collector, resource) == good, lambda: collector.envelopes)
        await collector.quiet(0.5)
        assert emitted(collector, resource) == good  # nothing more, nothing twice
        lists, watches = list(probes[resource].lists), list(probes[resource].watches)

    source = f"kube/{resource.value}"
    assert refusals.counts == {(source, "mapping"): 2}
    assert (
        registry.get_sample_value("gpufrag_refused_total", {"source": source, "reason": "mapping"})
        == 2
    )
    assert [r.detail.split(" ")[0] for r in kept] == [objects.key("bad-1"), objects.key("bad-2")]
    assert all("cpu_milli" in r.detail and "4096000" in r.detail for r in kept)
    # the raw object, for the dead letter; the server writes the quantity canonically
    assert all("bad-" in r.raw and '"cpu":"100P"' in r.raw for r in kept), kept[0].raw
    assert lists == ["ok"]  # one list, one page: no re-list because of the bad objects
    assert len(watches) == 1  # one watch, never re-opened
    assert sample(registry, "gpufrag_kube_reconnects_total", resource=resource.value) == 0
