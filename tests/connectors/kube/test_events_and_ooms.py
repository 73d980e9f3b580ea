"""Kubernetes Events and container OOM kills become scheduling events: the listed reasons
only, repeats as the count that is new, and each OOM kill exactly once, through the fake API
server."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from kubernetes_asyncio.client import ApiClient

from models import Envelope, KubeResource, PodEvent, SchedulerEvent, SchedulingEvent
from streams.profiles.operators import ProfileJoin
from tests.connectors.kube.helpers import Collector, kube_settings, running
from tests.kube_fake import FakeApiServer, FakeCluster
from tests.kube_fake.objects import T0, event, node, oom_status, pod

FAILED = (
    "0/12 nodes are available: 4 Insufficient nvidia.com/gpu, 8 node(s) had untolerated taint "
    "{nvidia.com/gpu: present}. preemption: 0/12 nodes are available: 12 No preemption victims "
    "found for incoming pod."
)


def scheduler_events(envelopes: list[Envelope]) -> list[SchedulerEvent]:
    return [e.payload.event for e in envelopes if isinstance(e.payload, SchedulingEvent)]


async def test_listed_reasons_become_scheduling_events_with_new_counts(
    cluster: FakeCluster, server: FakeApiServer, api_client: ApiClient, collector: Collector
) -> None:
    cluster.apply(
        event("train-0.1", reason="FailedScheduling", message=FAILED, pod="train-0", count=3)
    )
    cluster.apply(event("pulled", reason="Pulled", message="image pulled", pod="train-0"))
    cluster.apply(
        event(
            "n7.oom",
            reason="SystemOOM",
            message="System OOM encountered, victim process: python, pid: 4242",
            node="n7",
        )
    )
    cluster.apply(
        event(
            "inf-1.evict",
            reason="Evicted",
            message=(
                "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. "
            ),
            pod="inf-1",
            source_host="n3",
        )
    )
    async with running(api_client, kube_settings(KubeResource.EVENTS), collector) as source:
        await collector.wait_for(lambda: len(collector.envelopes) == 3)
        # The scheduler tries again: the same Event, count 3 -> 5.
        later = T0 + timedelta(minutes=2)
        cluster.apply(
            event(
                "train-0.1",
                reason="FailedScheduling",
                message=FAILED,
                pod="train-0",
                count=5,
                last=later,
            )
        )
        cluster.apply(
            event("pulled", reason="Pulled", message="image pulled again", pod="train-0", count=2)
        )
        await collector.wait_for(lambda: len(collector.envelopes) == 4)
        await collector.quiet()
        assert len(source.reflectors[KubeResource.EVENTS].store) == 4
    events = scheduler_events(collector.envelopes)
    by_reason = {e.reason: e for e in events[:3]}  # the list's order is the server's
    failed, oom, evicted = (
        by_reason["FailedScheduling"],
        by_reason["SystemOOM"],
        by_reason["Evicted"],
    )
    again = events[3]
    assert (failed.reason, failed.pod_namespace, failed.pod_name, failed.pod_uid, failed.count) == (
        "FailedScheduling",
        "ml",
        "train-0",
        "uid-train-0",
        3,
    )
    assert failed.message == FAILED
    assert (oom.reason, oom.node, oom.pod_name) == ("SystemOOM", "n7", None)
    keys = {
        e.payload.event.reason: e.key
        for e in collector.envelopes[:3]
        if isinstance(e.payload, SchedulingEvent)
    }
    assert keys == {"FailedScheduling": "ml/train-0", "SystemOOM": "n7", "Evicted": "ml/inf-1"}
    assert (evicted.reason, evicted.pod_name, evicted.node) == ("Evicted", "inf-1", "n3")
    assert (again.reason, again.count) == ("FailedScheduling", 2)
    assert collector.envelopes[3].event_time == T0 + timedelta(minutes=2)


async def test_oom_kill_is_emitted_once_per_container_run(
    cluster: FakeCluster, server: FakeApiServer, api_client: ApiClient, collector: Collector
) -> None:
    first_kill = datetime(2025, 3, 1, 12, 5, tzinfo=UTC)
    cluster.apply(pod("nb", gpus=1, node="n1", phase="Running"))
    async with running(api_client, kube_settings(KubeResource.PODS), collector) as source:
        await collector.wait_for(lambda: len(collector.envelopes) == 1)
        # The container is OOM killed: first `state`, then after the restart `lastState`.
        killed = oom_status(
            restarts=0, finished=first_kill, container_id="containerd://aaa", current=True
        )
        cluster.apply(pod("nb", gpus=1, node="n1", phase="Running", container_statuses=[killed]))
        restarted = oom_status(restarts=1, finished=first_kill, container_id="containerd://aaa")
        cluster.apply(pod("nb", gpus=1, node="n1", phase="Running", container_statuses=[restarted]))
        # Unrelated updates while lastState still shows that kill.
        cluster.apply(
            pod(
                "nb", gpus=1, node="n1", phase="Running", container_statuses=[restarted], priority=5
            )
        )
        await collector.wait_for(lambda: len(collector.envelopes) == 3)
        # A re-list (after 410) sees the same kill again and says nothing about it.
        server.faults.refuse_watches = True
        server.drop_watches()
        await asyncio.sleep(0.1)
        cluster.apply(node("n2"))  # the cluster moves on while the watch is away...
        cluster.compact()  # ...and forgets: the resumed watch gets 410 and re-lists
        server.faults.refuse_watches = False
        await collector.wait_for(lambda: len(server.lists("pods")) == 2)
        await collector.quiet()
        assert len(scheduler_events(collector.envelopes)) == 1
        # A second OOM kill, of the next run, is a second event.
        second_kill = first_kill + timedelta(minutes=3)
        again = oom_status(restarts=2, finished=second_kill, container_id="containerd://bbb")
        cluster.apply(
            pod("nb", gpus=1, node="n1", phase="Running", container_statuses=[again], priority=5)
        )
        await collector.wait_for(lambda: len(scheduler_events(collector.envelopes)) == 2)
        await collector.quiet()
        assert source.reflectors[KubeResource.PODS].store
    ooms = [e for e in collector.envelopes if isinstance(e.payload, SchedulingEvent)]
    assert [e.event_time for e in ooms] == [first_kill, second_kill]
    first = ooms[0].payload
    assert isinstance(first, SchedulingEvent)
    assert first.event.reason == "OOMKilled"
    assert (first.event.pod_namespace, first.event.pod_name, first.event.node) == ("ml", "nb", "n1")
    assert "container main was OOMKilled (exit code 137)" in first.event.message
    assert all(e.key == "ml/nb" for e in ooms)
    # Each OOM event comes after an upsert of its pod, so the profile join counts it.
    join = ProfileJoin()
    for env in collector.envelopes:
        join.apply(env)
    assert join.tasks["ml/nb"].oom_count == 2
    # the same kills again (a redelivery, or a watcher's list after its restart): not counted
    for env in ooms:
        assert join.apply(env) == []
    assert join.tasks["ml/nb"].oom_count == 2
    pods = [e for e in collector.envelopes if isinstance(e.payload, PodEvent)]
    # created, then priority 0 -> 5; status-only updates leave the pod's model as it was
    assert len(pods) == 2
