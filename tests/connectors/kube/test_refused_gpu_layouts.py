"""GPU layouts no card can have are refused per object at the mapping, with the reason, and
the watch goes on: a MIG profile of more slices than any card has, a fractional device count,
fewer time-slicing replicas than one card has, MIG instances more than the node's MIG cards
hold. Each used to pass: the profile as a ValueError inside the core that cost the whole
instant's signals, the others as a node whose cards changed without a word."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes_asyncio.client import ApiClient
from prometheus_client import CollectorRegistry
from pydantic import ValidationError

from connectors.kube.objects import MappingError
from connectors.kube.watch.nodes import node_from_kube
from connectors.kube.watch.pods import pod_from_kube
from connectors.refusals import RefusalLog
from models import Envelope, KubeResource, PodEvent, ResourceRequest, from_json, to_json
from tests.connectors.kube.helpers import Collector, kube_settings, running
from tests.kube_fake import FakeApiServer, FakeCluster
from tests.kube_fake.objects import container, node, pod

NOW = datetime(2025, 3, 2, tzinfo=UTC)
A100 = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}


def mig_pod(name: str, profile: str) -> Any:
    wanted = {"cpu": "1", f"nvidia.com/mig-{profile}": "1"}
    return pod(name, containers=[container(requests=wanted, limits=dict(wanted))])


@pytest.mark.parametrize(
    ("profile", "says"),
    [
        ("8g.80gb", "MIG profile '8g.80gb' needs 8 compute slices; a card has 1..7"),
        ("0g.5gb", "MIG profile '0g.5gb' needs 0 compute slices"),
        ("fast", "'fast' is not a MIG profile"),
        ("9999999999g.1gb", "needs 1000000 compute slices"),
    ],
    ids=["8-slices", "0-slices", "no-profile", "huge-number"],
)
def test_a_pod_asking_for_an_impossible_mig_profile_is_a_mapping_error(
    profile: str, says: str
) -> None:
    with pytest.raises(MappingError, match="requests: mig") as err:
        pod_from_kube(mig_pod("p", profile), gangs=lambda _ns, _n: None, now=NOW)
    assert says in str(err.value)


def test_no_source_can_hand_the_core_an_impossible_profile() -> None:
    # the models refuse it too: an event decoded from the bus cannot carry one either
    with pytest.raises(ValidationError, match="8 compute slices"):
        ResourceRequest(cpu_milli=1000, memory_mib=0, mig={"8g.80gb": 1})
    good = pod_from_kube(mig_pod("p", "7g.80gb"), gangs=lambda _ns, _n: None, now=NOW)
    event = PodEvent(change="upsert", pod=good)
    wire = to_json(Envelope.wrap(event, event_time=NOW, source="kube")).decode()
    assert '"7g.80gb"' in wire
    with pytest.raises(ValidationError, match="8 compute slices"):
        from_json(Envelope, wire.replace('"7g.80gb"', '"8g.80gb"'))


@pytest.mark.parametrize(
    ("labels", "allocatable", "says"),
    [
        ({}, {"nvidia.com/gpu": "500m"}, "allocatable nvidia.com/gpu='500m' is not a whole number"),
        ({}, {"nvidia.com/gpu": "1.5"}, "allocatable nvidia.com/gpu='1.5' is not a whole number"),
        (
            {"nvidia.com/gpu.replicas": "4"},
            {"nvidia.com/gpu": "2"},
            "allocatable nvidia.com/gpu=2 is below one card's nvidia.com/gpu.replicas=4 replicas",
        ),
        (
            {**A100, "nvidia.com/gpu.count": "1"},
            {"nvidia.com/gpu": "0", "nvidia.com/mig-3g.40gb": "5"},
            "allocatable MIG instances need 15 compute slices; the node's 1 MIG cards",
        ),
        (
            {**A100, "nvidia.com/gpu.count": "2"},
            {"nvidia.com/gpu": "1", "nvidia.com/mig-1g.10gb": "8"},
            "need 8 compute slices; the node's 1 MIG cards (nvidia.com/gpu.count less whole "
            "cards) have 7",
        ),
    ],
    ids=["500m", "fraction", "replicas-above-allocatable", "mig-over-one-card", "mig-beside-whole"],
)
def test_a_node_whose_devices_cannot_be_is_a_mapping_error(
    labels: dict[str, str], allocatable: dict[str, str], says: str
) -> None:
    n = node("odd", gpus=2, labels=labels, allocatable=allocatable)
    with pytest.raises(MappingError) as err:
        node_from_kube(n, pool_label=None, now=NOW)
    assert says in str(err.value)


def test_instances_that_fill_their_cards_exactly_are_read() -> None:
    labels = {**A100, "nvidia.com/gpu.count": "2"}
    allocatable = {
        "nvidia.com/gpu": "0",
        "nvidia.com/mig-3g.40gb": "2",
        "nvidia.com/mig-4g.40gb": "2",
    }
    out = node_from_kube(
        node("full", gpus=0, labels=labels, allocatable=allocatable), pool_label=None, now=NOW
    )
    assert (out.mig_cards, out.mig_devices) == (2, {"3g.40gb": 2, "4g.40gb": 2})


async def test_the_watch_refuses_the_bad_pod_and_emits_the_rest(
    cluster: FakeCluster, server: FakeApiServer, api_client: ApiClient, collector: Collector
) -> None:
    cluster.apply(mig_pod("fits", "3g.40gb"))
    cluster.apply(mig_pod("too-big", "8g.80gb"))
    cluster.apply(pod("whole", gpus=1))
    refusals = RefusalLog(registry=CollectorRegistry())
    async with running(api_client, kube_settings(KubeResource.PODS), collector, refusals=refusals):
        await collector.wait_for(lambda: len(collector.envelopes) == 2, timeout=30)
        await collector.quiet()
    keys = [e.payload.pod.key for e in collector.envelopes if isinstance(e.payload, PodEvent)]
    assert keys == ["ml/fits", "ml/whole"]
    assert refusals.counts == {("kube/pods", "mapping"): 1}
    assert refusals.last is not None and refusals.last.detail.startswith("ml/too-big ")
    assert "MIG profile '8g.80gb' needs 8 compute slices" in refusals.last.detail
