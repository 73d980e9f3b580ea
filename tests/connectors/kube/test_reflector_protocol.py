"""The list+watch reflector against the fake API server over real HTTP: what is emitted across
410 Gone, dropped and resumed watches, bookmarks, outages and churn."""

from __future__ import annotations

import asyncio
import logging

import pytest
from kubernetes_asyncio.client import ApiClient
from prometheus_client import CollectorRegistry

from models import Envelope, KubeResource, PodEvent, PodPhase
from tests.connectors.kube.helpers import Collector, kube_settings, running
from tests.kube_fake import FakeApiServer, FakeCluster
from tests.kube_fake.objects import node, pod, volcano_queue

PODS = KubeResource.PODS


def changes(envelopes: list[Envelope]) -> list[tuple[str, str]]:
    """(change, "namespace/name") of pod envelopes, in emission order."""
    out = []
    for env in envelopes:
        assert isinstance(env.payload, PodEvent)
        out.append((env.payload.change, env.payload.pod.key))
    return out


def kube_logs(caplog: pytest.LogCaptureFixture, text: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "connectors.kube" and text in r.getMessage()]


async def test_list_then_watch_emits_each_change_once(
    cluster: FakeCluster, server: FakeApiServer, api_client: ApiClient, collector: Collector
) -> None:
    cluster.apply(pod("a", gpus=1))
    cluster.apply(pod("b", gpus=2))
    async with running(api_client, kube_settings(PODS), collector) as source:
        await collector.wait_for(lambda: len(collector.envelopes) == 2)
        cluster.apply(pod("a", gpus=1, node="n1", phase="Running"))
        cluster.apply(pod("c", gpus=4))
        cluster.delete("pods", "b", "ml")
        await collector.wait_for(lambda: len(collector.envelopes) == 5)
        await collector.quiet()
        reflector = source.reflectors[PODS]
    assert changes(collector.envelopes) == [
        ("upsert", "ml/a"),
        ("upsert", "ml/b"),
        ("upsert", "ml/a"),
        ("upsert", "ml/c"),
        ("delete", "ml/b"),
    ]
    moved = collector.envelopes[2].payload
    assert isinstance(moved, PodEvent)
    assert moved.pod.node == "n1" and moved.pod.phase is PodPhase.RUNNING
    assert len(server.lists("pods")) == 1
    first_watch = server.watches("pods")[0]
    assert first_watch.query["allowWatchBookmarks"].lower() == "true"
    assert first_watch.resource_version == str(cluster.rv - 3)  # the list's resourceVersion
    assert reflector.resource_version == str(cluster.rv)


@pytest.mark.parametrize("gone_as_http", [False, True], ids=["error-event", "http-410"])
async def test_relist_after_410_yields_exactly_the_missed_changes(
    cluster: FakeCluster,
    server: FakeApiServer,
    api_client: ApiClient,
    collector: Collector,
    gone_as_http: bool,
) -> None:
    for name in "abcde":
        cluster.apply(pod(name, gpus=1))
    registry = CollectorRegistry()
    server.faults.gone_as_http = gone_as_http
    async with running(api_client, kube_settings(PODS), collector, registry=registry) as source:
        await collector.wait_for(lambda: len(collector.envelopes) == 5)
        old_rv = source.reflectors[PODS].resource_version
        # The watch goes away and cannot come back while the cluster changes...
        server.faults.refuse_watches = True
        server.drop_watches()
        await asyncio.sleep(0.1)
        mark = len(collector.envelopes)
        cluster.apply(pod("a", gpus=1, node="n1", phase="Running"))  # changed
        cluster.delete("pods", "b", "ml")  # deleted
        cluster.apply(pod("f", gpus=2))  # added
        cluster.apply(pod("c", gpus=1))  # new resourceVersion, same pod: nothing to say
        # ...and the server forgets that history: the resumed watch gets 410.
        cluster.compact()
        server.faults.refuse_watches = False
        await collector.wait_for(lambda: len(server.lists("pods")) == 2)
        await collector.wait_for(lambda: len(collector.envelopes) >= mark + 3)
        await collector.quiet()
        assert changes(collector.since(mark)) == [
            ("delete", "ml/b"),
            ("upsert", "ml/a"),
            ("upsert", "ml/f"),
        ]
        gone = [w for w in server.watches("pods") if w.resource_version == old_rv]
        assert gone and gone[-1].status == (410 if gone_as_http else 200)
        # The watch continues from the re-list's resourceVersion.
        mark = len(collector.envelopes)
        cluster.apply(pod("g", gpus=1))
        await collector.wait_for(lambda: len(collector.envelopes) == mark + 1)
        assert changes(collector.since(mark)) == [("upsert", "ml/g")]
    assert (
        registry.get_sample_value(
            "gpufrag_kube_errors_total", {"resource": "pods", "reason": "gone"}
        )
        == 1
    )
    assert registry.get_sample_value("gpufrag_kube_relists_total", {"resource": "pods"}) == 2


async def test_dropped_watch_resumes_from_last_version_without_duplicates(
    cluster: FakeCluster, server: FakeApiServer, api_client: ApiClient, collector: Collector
) -> None:
    cluster.apply(pod("a", gpus=1))
    registry = CollectorRegistry()
    async with running(api_client, kube_settings(PODS), collector, registry=registry) as source:
        await collector.wait_for(lambda: len(collector.envelopes) == 1)
        cluster.apply(pod("b", gpus=1))
        await collector.wait_for(lambda: len(collector.envelopes) == 2)
        seen_rv = source.reflectors[PODS].resource_version
        server.drop_watches()
        cluster.apply(pod("c", gpus=1))  # happens while the watch is being re-opened
        await collector.wait_for(lambda: len(collector.envelopes) == 3)
        await collector.quiet()
    assert changes(collector.envelopes) == [
        ("upsert", "ml/a"),
        ("upsert", "ml/b"),
        ("upsert", "ml/c"),
    ]
    assert len(server.lists("pods")) == 1  # no re-list: the watch resumed
    assert [w.resource_version for w in server.watches("pods")][1] == seen_rv
    assert registry.get_sample_value("gpufrag_kube_reconnects_total", {"resource": "pods"}) == 1


async def test_bookmark_advances_the_version_a_resumed_watch_starts_from(
    cluster: FakeCluster, server: FakeApiServer, api_client: ApiClient, collector: Collector
) -> None:
    cluster.apply(pod("a", gpus=1))
    async with running(api_client, kube_settings(PODS), collector) as source:
        await collector.wait_for(lambda: len(collector.envelopes) == 1)
        reflector = source.reflectors[PODS]
        listed_rv = reflector.resource_version
        await collector.wait_for(lambda: len(cluster.subscribers) == 1)  # the watch is open
        for i in range(5):  # other resources move the cluster's version, not the pods
            cluster.apply(node(f"n{i}"))
        cluster.bookmark()
        await collector.wait_for(lambda: reflector.resource_version == str(cluster.rv))
        bookmark_rv = reflector.resource_version
        assert bookmark_rv != listed_rv
        # History before the bookmark is gone: only a watch resumed from the bookmark's
        # version can go on without a 410 and a re-list.
        cluster.compact()
        server.drop_watches()
        cluster.apply(pod("z", gpus=1))
        await collector.wait_for(lambda: len(collector.envelopes) == 2)
        await collector.quiet()
    assert changes(collector.envelopes) == [("upsert", "ml/a"), ("upsert", "ml/z")]
    assert len(server.lists("pods")) == 1
    assert [w.resource_version for w in server.watches("pods")][1] == bookmark_rv


async def test_periodic_bookmarks_on_an_idle_watch(
    cluster: FakeCluster, server: FakeApiServer, api_client: ApiClient, collector: Collector
) -> None:
    server.faults.bookmark_every_s = 0.05
    async with running(api_client, kube_settings(PODS), collector) as source:
        reflector = source.reflectors[PODS]
        await collector.wait_for(lambda: len(cluster.subscribers) == 1)
        cluster.apply(node("n1"))
        await collector.wait_for(lambda: reflector.resource_version == str(cluster.rv))
    assert collector.envelopes == []


async def test_missing_crd_is_skipped_with_one_log_line_and_no_hot_loop(
    server: FakeApiServer,
    api_client: ApiClient,
    collector: Collector,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="connectors.kube")
    registry = CollectorRegistry()
    settings = kube_settings(KubeResource.KUEUE_WORKLOADS, KubeResource.VOLCANO_QUEUES)
    async with running(api_client, settings, collector, registry=registry) as source:
        await asyncio.sleep(1.0)
        assert all(r.missing and r.synced.is_set() for r in source.reflectors.values())
    workloads = [r for r in server.requests if r.path == "/apis/kueue.x-k8s.io/v1beta1/workloads"]
    queues = [r for r in server.requests if r.path == "/apis/scheduling.volcano.sh/v1beta1/queues"]
    assert [r.status for r in workloads] == [404]
    assert [r.status for r in queues] == [404]
    assert len(kube_logs(caplog, "kueue-workloads")) == 1
    assert len(kube_logs(caplog, "volcano-queues")) == 1
    assert (
        registry.get_sample_value("gpufrag_kube_resource_missing", {"resource": "kueue-workloads"})
        == 1
    )
    assert collector.envelopes == []


async def test_missing_crd_is_rechecked_rarely_and_picked_up_once_installed(
    cluster: FakeCluster,
    server: FakeApiServer,
    api_client: ApiClient,
    collector: Collector,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="connectors.kube")
    settings = kube_settings(KubeResource.VOLCANO_QUEUES, missing_recheck_s=0.25)
    async with running(api_client, settings, collector) as source:
        await asyncio.sleep(1.0)
        asked = len(server.lists("queues"))
        assert 2 <= asked <= 6  # every 0.25 s, not a loop
        assert len(kube_logs(caplog, "volcano-queues")) == 1
        cluster.install("scheduling.volcano.sh", "v1beta1", "queues", "Queue", namespaced=False)
        cluster.apply(volcano_queue("research", deserved=8, capability=16))
        await collector.wait_for(lambda: len(collector.envelopes) == 1, timeout=3)
        assert not source.reflectors[KubeResource.VOLCANO_QUEUES].missing
    assert collector.envelopes[0].key == "VolcanoQueue:research"


async def test_api_server_down_at_start_then_up(
    cluster: FakeCluster,
    fake: FakeApiServer,
    api_client: ApiClient,
    collector: Collector,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="connectors.kube")
    registry = CollectorRegistry()
    cluster.apply(pod("a", gpus=1))
    async with running(api_client, kube_settings(PODS), collector, registry=registry):
        await asyncio.sleep(0.4)  # connection refused, retried with backoff
        refused = registry.get_sample_value(
            "gpufrag_kube_errors_total", {"resource": "pods", "reason": "connect"}
        )
        assert refused is not None and 2 <= refused <= 15
        await fake.start()
        await collector.wait_for(lambda: len(collector.envelopes) == 1)
        cluster.apply(pod("b", gpus=1))
        await collector.wait_for(lambda: len(collector.envelopes) == 2)
    assert changes(collector.envelopes) == [("upsert", "ml/a"), ("upsert", "ml/b")]
    assert len(kube_logs(caplog, "list failed")) == 1  # one line for the outage, not per retry
    assert len(kube_logs(caplog, "answering again")) == 1
    last = registry.get_sample_value(
        "gpufrag_kube_last_success_timestamp_seconds", {"resource": "pods"}
    )
    assert last is not None and last > 0
    assert registry.get_sample_value("gpufrag_kube_events_total", {"resource": "pods"}) == 2


async def test_api_server_going_away_mid_stream_and_back_resumes(
    cluster: FakeCluster, server: FakeApiServer, api_client: ApiClient, collector: Collector
) -> None:
    cluster.apply(pod("a", gpus=1))
    registry = CollectorRegistry()
    async with running(api_client, kube_settings(PODS), collector, registry=registry):
        await collector.wait_for(lambda: len(collector.envelopes) == 1)
        await server.stop()
        cluster.apply(pod("a", gpus=1, node="n1", phase="Running"))
        cluster.apply(pod("b", gpus=1))
        await asyncio.sleep(0.3)
        await server.start()
        await collector.wait_for(lambda: len(collector.envelopes) == 3)
        await collector.quiet()
    assert changes(collector.envelopes) == [
        ("upsert", "ml/a"),
        ("upsert", "ml/a"),
        ("upsert", "ml/b"),
    ]
    assert len(server.lists("pods")) == 1  # resumed from its version, no re-list
    reconnects = registry.get_sample_value("gpufrag_kube_reconnects_total", {"resource": "pods"})
    assert reconnects is not None and reconnects >= 1


async def test_store_holds_exactly_the_live_objects_after_churn(
    cluster: FakeCluster, server: FakeApiServer, api_client: ApiClient, collector: Collector
) -> None:
    for i in range(60):
        cluster.apply(pod(f"p{i}", gpus=1))
    registry = CollectorRegistry()
    async with running(api_client, kube_settings(PODS), collector, registry=registry) as source:
        reflector = source.reflectors[PODS]
        await asyncio.wait_for(reflector.synced.wait(), 3)
        for round_ in range(4):
            for i in range(60):
                name = f"p{i}"
                if (i + round_) % 3 == 0 and any(
                    o["metadata"]["name"] == name for o in cluster.live("pods")
                ):
                    cluster.delete("pods", name, "ml")
                else:
                    cluster.apply(pod(name, gpus=1 + round_ % 2, priority=round_))
            if round_ == 1:
                server.drop_watches()
            if round_ == 2:
                server.faults.refuse_watches = True
                server.drop_watches()
                await asyncio.sleep(0.1)
                cluster.compact()
                server.faults.refuse_watches = False
            await asyncio.sleep(0.05)

        def live() -> dict[str, str]:
            return {
                o["metadata"]["uid"]: o["metadata"]["resourceVersion"] for o in cluster.live("pods")
            }

        await collector.wait_for(
            lambda: {k: e.rv for k, e in reflector.store.items()} == live(), timeout=5
        )
        assert len(reflector.store) == len(live()) < 60 + 1
        assert registry.get_sample_value("gpufrag_kube_objects", {"resource": "pods"}) == len(
            live()
        )
    # What was emitted, replayed, leaves exactly the live pods.
    state: dict[str, int] = {}
    for env in collector.envelopes:
        assert isinstance(env.payload, PodEvent)
        if env.payload.change == "delete":
            state.pop(env.payload.pod.key)
        else:
            state[env.payload.pod.key] = env.payload.pod.priority
    assert state == {
        f"ml/{o['metadata']['name']}": o["spec"].get("priority", 0) for o in cluster.live("pods")
    }


async def test_paged_list_and_expired_continue_token(
    cluster: FakeCluster, server: FakeApiServer, api_client: ApiClient, collector: Collector
) -> None:
    for i in range(120):
        cluster.apply(pod(f"p{i:03d}", gpus=1))
    server.faults.expire_continues = 1
    async with running(api_client, kube_settings(PODS, page_size=50), collector):
        await collector.wait_for(lambda: len(collector.envelopes) == 120)
        await collector.quiet()
    assert len(collector.envelopes) == 120
    assert len({e.key for e in collector.envelopes}) == 120
    # first page, the expired continuation (410), then a fresh list of three pages
    assert [r.status for r in server.lists("pods")] == [200, 410, 200, 200, 200]
    assert all(r.query["limit"] == "50" for r in server.lists("pods"))


async def test_namespace_and_selectors_are_applied_by_the_server(
    cluster: FakeCluster, server: FakeApiServer, api_client: ApiClient, collector: Collector
) -> None:
    cluster.apply(pod("a", "ml", gpus=1, labels={"team": "vision"}, phase="Running"))
    cluster.apply(pod("b", "ml", gpus=1, labels={"team": "nlp"}))
    cluster.apply(pod("c", "other", gpus=1, labels={"team": "vision"}))
    cluster.apply(pod("d", "ml", gpus=1, labels={"team": "vision"}, phase="Succeeded"))
    settings = kube_settings(
        PODS,
        namespace="ml",
        label_selectors={PODS: "team in (vision,speech)"},
        field_selectors={PODS: "status.phase!=Succeeded"},
    )
    async with running(api_client, settings, collector):
        await collector.wait_for(lambda: len(collector.envelopes) == 1)
        cluster.apply(pod("a", "ml", gpus=1, labels={"team": "nlp"}, phase="Running"))
        cluster.apply(pod("e", "ml", gpus=1, labels={"team": "speech"}))
        await collector.wait_for(lambda: len(collector.envelopes) == 3)
        await collector.quiet()
    assert changes(collector.envelopes) == [
        ("upsert", "ml/a"),
        ("delete", "ml/a"),
        ("upsert", "ml/e"),
    ]
    first = server.requests[0]
    assert first.path == "/api/v1/namespaces/ml/pods"
    assert first.query["labelSelector"] == "team in (vision,speech)"
    assert first.query["fieldSelector"] == "status.phase!=Succeeded"


async def test_slow_list_times_out_and_is_retried(
    cluster: FakeCluster, server: FakeApiServer, api_client: ApiClient, collector: Collector
) -> None:
    cluster.apply(pod("a", gpus=1))
    server.faults.slow_lists, server.faults.slow_s = 1, 1.0
    registry = CollectorRegistry()
    settings = kube_settings(PODS, request_timeout_s=0.3)
    async with running(api_client, settings, collector, registry=registry):
        await collector.wait_for(lambda: len(collector.envelopes) == 1)
        await collector.quiet()
    assert changes(collector.envelopes) == [("upsert", "ml/a")]
    assert (
        registry.get_sample_value(
            "gpufrag_kube_errors_total", {"resource": "pods", "reason": "timeout"}
        )
        == 1
    )


async def test_rejected_token_backs_off_instead_of_hammering(
    cluster: FakeCluster,
    server: FakeApiServer,
    collector: Collector,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="connectors.kube")
    cluster.apply(pod("a", gpus=1))
    client = ApiClient(configuration=server.configuration(token="wrong"))
    try:
        async with running(client, kube_settings(PODS), collector):
            await asyncio.sleep(0.8)
    finally:
        await client.close()
    assert collector.envelopes == []
    assert all(r.status == 401 for r in server.requests)
    assert 3 <= len(server.requests) <= 20  # backoff up to 0.1 s: about 10 in 0.8 s
    assert len(kube_logs(caplog, "HTTP 401")) == 1
