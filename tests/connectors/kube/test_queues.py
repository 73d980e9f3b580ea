"""Quota and queue objects -> QueueEvents: ResourceQuotas (kubernetes-asyncio models) that
limit GPUs, Kueue and Volcano custom resources where their CRDs are installed, and the Volcano
PodGroup size reaching the pods of the gang."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from kubernetes_asyncio.client import ApiClient

from connectors.clickhouse.rows import event_row
from connectors.kube.watch.queue_objects import (
    cluster_queue_from_dict,
    local_queue_from_dict,
    pod_group_from_dict,
    quota_from_kube,
    volcano_queue_from_dict,
    workload_from_dict,
)
from models import (
    Envelope,
    EventKind,
    GangRef,
    KubeResource,
    PodEvent,
    QueueEvent,
    QueueObject,
    QueueSourceKind,
    from_json,
    to_json,
)
from tests.connectors.kube.helpers import Collector, kube_settings, running
from tests.kube_fake import FakeApiServer, FakeCluster
from tests.kube_fake.objects import cluster_queue, pod, pod_group, quota, volcano_queue

AT = datetime(2025, 3, 1, tzinfo=UTC)


def test_resource_quota_limiting_gpus() -> None:
    q = quota(
        "gpu-quota",
        "ml",
        hard={"requests.nvidia.com/gpu": "16", "requests.cpu": "200", "pods": "100"},
        used={"requests.nvidia.com/gpu": "12", "requests.cpu": "150"},
    )
    out = quota_from_kube(q)
    assert out is not None
    assert (out.source_kind, out.namespace, out.name) == (
        QueueSourceKind.RESOURCE_QUOTA,
        "ml",
        "gpu-quota",
    )
    assert out.nominal == out.limit == {"nvidia.com/gpu": 16.0}
    assert out.used == {"nvidia.com/gpu": 12.0}
    assert out.key == "ResourceQuota:ml/gpu-quota"
    assert quota_from_kube(quota("cpu-only", "ml", hard={"requests.cpu": "10"})) is None


def test_kueue_cluster_queue_with_cohort_and_borrowing() -> None:
    bounded = cluster_queue_from_dict(cluster_queue("team-a", gpus=16, borrowing=8, cohort="org"))
    assert (bounded.cohort, bounded.nominal, bounded.limit) == (
        "org",
        {"nvidia.com/gpu": 16.0},
        {"nvidia.com/gpu": 24.0},
    )
    assert (bounded.used, bounded.pending, bounded.admitted, bounded.state) == (
        {"nvidia.com/gpu": 4.0},
        2,
        1,
        "Active",
    )
    assert bounded.key == "ClusterQueue:team-a"
    unbounded = cluster_queue_from_dict(cluster_queue("team-b", gpus=8, cohort="org"))
    assert unbounded.limit == {}  # may borrow whatever the cohort has idle
    alone = cluster_queue_from_dict(cluster_queue("solo", gpus=4))
    assert (alone.cohort, alone.limit) == (None, {"nvidia.com/gpu": 4.0})


def test_kueue_local_queue_and_workload() -> None:
    lq = local_queue_from_dict(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "LocalQueue",
            "metadata": {"name": "team-a", "namespace": "ml"},
            "spec": {"clusterQueue": "team-a"},
            "status": {
                "pendingWorkloads": 3,
                "admittedWorkloads": 2,
                "flavorUsage": [
                    {"name": "h100", "resources": [{"name": "nvidia.com/gpu", "total": "8"}]}
                ],
            },
        }
    )
    assert (lq.namespace, lq.parent, lq.pending, lq.admitted, lq.used) == (
        "ml",
        "team-a",
        3,
        2,
        {"nvidia.com/gpu": 8.0},
    )
    template: dict[str, Any] = {
        "spec": {
            "containers": [
                {"name": "w", "resources": {"requests": {"nvidia.com/gpu": "2", "cpu": "8"}}}
            ],
        }
    }
    wl = workload_from_dict(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "Workload",
            "metadata": {"name": "job-sweep-7", "namespace": "ml"},
            "spec": {
                "queueName": "team-a",
                "podSets": [
                    {"name": "main", "count": 4, "template": template},
                    {
                        "name": "launcher",
                        "count": 1,
                        "template": {"spec": {"containers": [{"name": "l"}]}},
                    },
                ],
            },
            "status": {"conditions": [{"type": "QuotaReserved", "status": "True"}]},
        }
    )
    assert (wl.parent, wl.requested, wl.state) == (
        "team-a",
        {"nvidia.com/gpu": 8.0},
        "QuotaReserved",
    )


def test_volcano_pod_group_and_queue() -> None:
    pg = pod_group_from_dict(pod_group("llm", "ml", min_member=16, queue="research"))
    assert (pg.min_member, pg.parent, pg.requested, pg.state) == (
        16,
        "research",
        {"nvidia.com/gpu": 16.0},
        "Pending",
    )
    vq = volcano_queue_from_dict(volcano_queue("research", deserved=8, capability=16))
    assert (vq.nominal, vq.limit, vq.used, vq.state, vq.pending, vq.admitted) == (
        {"nvidia.com/gpu": 8.0},
        {"nvidia.com/gpu": 16.0},
        {"nvidia.com/gpu": 6.0},
        "Open",
        1,
        3,
    )


def test_queue_event_is_a_bus_message_and_a_history_row() -> None:
    queue = QueueObject(
        source_kind=QueueSourceKind.CLUSTER_QUEUE, name="team-a", nominal={"nvidia.com/gpu": 16.0}
    )
    env = Envelope.wrap(QueueEvent(change="upsert", queue=queue), event_time=AT, source="kube")
    assert env.kind is EventKind.QUEUE and env.key == "ClusterQueue:team-a"
    assert from_json(Envelope, to_json(env)) == env
    row = event_row("run-1", env, ingested_at=AT)
    assert (row["kind"], row["key"]) == ("queue", "ClusterQueue:team-a")
    deleted = Envelope.wrap(QueueEvent(change="delete", queue=queue), event_time=AT, source="kube")
    assert deleted.id != env.id


async def test_quota_and_queue_watchers_through_the_api_server(
    cluster: FakeCluster, server: FakeApiServer, api_client: ApiClient, collector: Collector
) -> None:
    cluster.install("kueue.x-k8s.io", "v1beta1", "clusterqueues", "ClusterQueue", namespaced=False)
    cluster.apply(quota("gpu", "ml", hard={"requests.nvidia.com/gpu": "8"}))
    cluster.apply(quota("cpu", "ml", hard={"requests.cpu": "8"}))
    cluster.apply(cluster_queue("team-a", gpus=16))
    settings = kube_settings(
        KubeResource.RESOURCE_QUOTAS,
        KubeResource.KUEUE_CLUSTER_QUEUES,
        KubeResource.KUEUE_LOCAL_QUEUES,  # not installed: skipped
    )
    async with running(api_client, settings, collector) as source:
        await collector.wait_for(lambda: len(collector.envelopes) == 2)
        # The quota stops limiting GPUs: for gpufrag it is gone.
        cluster.apply(quota("gpu", "ml", hard={"requests.cpu": "8"}))
        cluster.apply(cluster_queue("team-a", gpus=24))
        await collector.wait_for(lambda: len(collector.envelopes) == 4)
        await collector.quiet()
        assert source.reflectors[KubeResource.KUEUE_LOCAL_QUEUES].missing
        assert len(source.reflectors[KubeResource.RESOURCE_QUOTAS].store) == 2
    payloads = [e.payload for e in collector.envelopes]
    assert all(isinstance(p, QueueEvent) for p in payloads)
    seen = sorted(
        (p.change, p.queue.key, p.queue.nominal.get("nvidia.com/gpu"))
        for p in payloads
        if isinstance(p, QueueEvent)
    )
    assert seen == [
        ("delete", "ResourceQuota:ml/gpu", 8.0),
        ("upsert", "ClusterQueue:team-a", 16.0),
        ("upsert", "ClusterQueue:team-a", 24.0),
        ("upsert", "ResourceQuota:ml/gpu", 8.0),
    ]


async def test_volcano_pod_group_size_reaches_its_pods(
    cluster: FakeCluster, server: FakeApiServer, api_client: ApiClient, collector: Collector
) -> None:
    cluster.install("scheduling.volcano.sh", "v1beta1", "podgroups", "PodGroup", namespaced=True)
    note = {"scheduling.k8s.io/group-name": "llm"}
    cluster.apply(pod("w-0", gpus=8, annotations=note))
    cluster.apply(pod("w-1", gpus=8, annotations=note))
    cluster.apply(pod("solo", gpus=1))
    settings = kube_settings(KubeResource.PODS, KubeResource.VOLCANO_POD_GROUPS)
    async with running(api_client, settings, collector) as source:
        pods = source.reflectors[KubeResource.PODS]
        await collector.wait_for(lambda: len(pods.store) == 3)
        mark = len(collector.envelopes)
        cluster.apply(pod_group("llm", "ml", min_member=2))
        await collector.wait_for(lambda: len(collector.envelopes) >= mark + 3)
        cluster.apply(pod("w-2", gpus=8, annotations=note))  # a late member knows the size
        await collector.wait_for(lambda: len(collector.envelopes) >= mark + 4)
        await collector.quiet()
    gangs = {
        e.payload.pod.name: e.payload.pod.gang
        for e in collector.envelopes
        if isinstance(e.payload, PodEvent)
    }
    assert gangs == {
        "w-0": GangRef(name="llm", min_member=2),
        "w-1": GangRef(name="llm", min_member=2),
        "w-2": GangRef(name="llm", min_member=2),
        "solo": None,
    }
    assert sum(isinstance(e.payload, QueueEvent) for e in collector.envelopes) == 1
