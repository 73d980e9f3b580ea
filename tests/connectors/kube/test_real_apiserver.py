"""The watchers against a real kube-apiserver (deploy/local/apiserver.sh, the `apiserver` session
fixture): objects are created, changed and deleted through kubernetes-asyncio's API from its
models, each test in its own namespace, and what KubeSource emits is compared with what happened.

apiserver.sh serves pods without the watch cache (`--watch-cache-sizes pods#0`): a pod watch
reads etcd's history, so compacting etcd makes an old resourceVersion answer 410 Gone, as a long
disconnection does in a real cluster. Nodes go through the watch cache, the usual path.

Every test that watches pods on the real server is in this one file: pytest-xdist (`--dist
loadfile`) runs a file's tests on one worker, one at a time, and compacting etcd (the 410 test)
while another test's pod watch reopens from an older resourceVersion would make that watch
answer 410 Gone, which the other tests count as a re-list.

The last test is issue 11's acceptance: one object with an absurd but API-valid quantity (10^17
cores; the server accepts it) among good ones, on the initial list and again created while
watching. Every good object is emitted, the bad one is refused (counted by source and reason,
dead-lettered with its raw form), and neither the list nor the watch is restarted because of it.
"""

from __future__ import annotations

import asyncio
import logging

import pytest
from kubernetes_asyncio.client import (
    ApiClient,
)
from prometheus_client import CollectorRegistry

from connectors.refusals import RefusalLog
from models import KubeResource, NodeEvent, PodEvent, PodPhase
from models.refusal import Refusal
from tests.connectors.kube.helpers import Collector, kube_settings
from tests.connectors.kube.real_apiserver import (
    NODES,
    PODS,
    Nodes,
    Pods,
    changes,
    compact_etcd,
    kube_logs,
    pods_of,
    sample,
    until,
    watching,
)
from tests.local_apiserver import ApiServer

pytestmark = pytest.mark.apiserver


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


# --- bad objects among good ones -------------------------------------------------------------

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
