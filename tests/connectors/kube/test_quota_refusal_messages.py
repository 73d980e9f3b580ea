"""The FailedCreate message reader as a scenario table: the API server's quota wording as the
Job, ReplicaSet and StatefulSet controllers wrap it (and client-go's aggregation), several
resources, a quota on no GPU, wording of another shape (kept as text: None), and figures that
cannot be read (refused with the reason: MappingError)."""

from __future__ import annotations

import pytest
from kubernetes_asyncio.client import ApiClient
from prometheus_client import CollectorRegistry

from connectors.kube.objects import MappingError
from connectors.kube.watch.failed_create import is_quota_refusal, parse_quota_refusal
from connectors.refusals import RefusalLog
from models import KubeResource, SchedulingEvent
from tests.connectors.kube.helpers import Collector, Kept, kube_settings, running
from tests.kube_fake import FakeApiServer, FakeCluster
from tests.streams.quota_scenarios import failed_create

GPU = (
    "exceeded quota: gpu, requested: requests.nvidia.com/gpu=1, "
    "used: requests.nvidia.com/gpu=2, limited: requests.nvidia.com/gpu=2"
)
JOB = f'Error creating: pods "train-x7k2p" is forbidden: {GPU}'


@pytest.mark.parametrize(
    ("message", "quota", "pod", "requested", "used", "limited", "gpu"),
    [
        # the Job and ReplicaSet controllers (controller_utils: "Error creating: %v")
        (JOB, "gpu", "train-x7k2p", {"requests.nvidia.com/gpu": 1.0},
         {"requests.nvidia.com/gpu": 2.0}, {"requests.nvidia.com/gpu": 2.0},
         ("requests.nvidia.com/gpu",)),
        # client-go's aggregation of similar events
        (f"(combined from similar events): {JOB}", "gpu", "train-x7k2p",
         {"requests.nvidia.com/gpu": 1.0}, {"requests.nvidia.com/gpu": 2.0},
         {"requests.nvidia.com/gpu": 2.0}, ("requests.nvidia.com/gpu",)),
        # the StatefulSet controller's own prefix; a Forbidden error without a name
        (f"create Pod web-3 in StatefulSet web failed error: pods is forbidden: {GPU}", "gpu",
         None, {"requests.nvidia.com/gpu": 1.0}, {"requests.nvidia.com/gpu": 2.0},
         {"requests.nvidia.com/gpu": 2.0}, ("requests.nvidia.com/gpu",)),
        # several resources, sorted by name as the admission prints them; MIG and memory units
        ('Error creating: pods "inf-1" is forbidden: exceeded quota: team-a, requested: '
         "requests.memory=8Gi,requests.nvidia.com/mig-1g.10gb=2, used: requests.memory=120Gi,"
         "requests.nvidia.com/mig-1g.10gb=6, limited: requests.memory=128Gi,"
         "requests.nvidia.com/mig-1g.10gb=7", "team-a", "inf-1",
         {"requests.memory": 8 * 2**30, "requests.nvidia.com/mig-1g.10gb": 2.0},
         {"requests.memory": 120 * 2**30, "requests.nvidia.com/mig-1g.10gb": 6.0},
         {"requests.memory": 128 * 2**30, "requests.nvidia.com/mig-1g.10gb": 7.0},
         ("requests.nvidia.com/mig-1g.10gb",)),
        # a quota on no GPU: read, with no GPU resource (it opens nothing)
        ('Error creating: pods "web-5" is forbidden: exceeded quota: compute, requested: '
         "limits.cpu=500m,pods=1, used: limits.cpu=9800m,pods=20, limited: limits.cpu=10,pods=20",
         "compute", "web-5", {"limits.cpu": 0.5, "pods": 1.0}, {"limits.cpu": 9.8, "pods": 20.0},
         {"limits.cpu": 10.0, "pods": 20.0}, ()),
        # no usage recorded yet for the resource: the used list is empty
        ('Error creating: pods "a" is forbidden: exceeded quota: gpu, requested: '
         "requests.nvidia.com/gpu=4, used: , limited: requests.nvidia.com/gpu=2", "gpu", "a",
         {"requests.nvidia.com/gpu": 4.0}, {}, {"requests.nvidia.com/gpu": 2.0},
         ("requests.nvidia.com/gpu",)),
    ],
)  # fmt: skip
def test_the_api_servers_wording_is_read(
    message: str,
    quota: str,
    pod: str | None,
    requested: dict[str, float],
    used: dict[str, float],
    limited: dict[str, float],
    gpu: tuple[str, ...],
) -> None:
    assert is_quota_refusal("FailedCreate", message)
    r = parse_quota_refusal(message)
    assert r is not None
    assert (r.quota, r.pod, r.requested, r.used, r.limited, r.gpu_resources) == (
        quota, pod, requested, used, limited, gpu
    )  # fmt: skip


@pytest.mark.parametrize(
    "message",
    [
        "Error creating: pods is forbidden: exceeded quota, in the words of a future release",
        "Error creating: exceeded quota: gpu (requests.nvidia.com/gpu: 1 of 2)",
        "exceeded quota: gpu, requested: requests.nvidia.com/gpu=1",  # cut short
        "",
    ],
)
def test_other_wording_is_kept_as_text(message: str) -> None:
    assert parse_quota_refusal(message) is None


@pytest.mark.parametrize(
    ("message", "why"),
    [
        (GPU.replace("requested: requests.nvidia.com/gpu=1", "requested: requests.nvidia.com/gpu"),
         "is not <resource>=<quantity>"),
        (GPU.replace("gpu=1", "gpu=lots"), "not a quantity"),
        (GPU.replace("gpu=1", "gpu=-1"), "negative"),
        (GPU.replace("gpu=1", "gpu=1e999999"), "past any real resource"),
        (GPU.replace("requested: requests.nvidia.com/gpu=1",
                     "requested: requests.nvidia.com/gpu=1,requests.nvidia.com/gpu=1"),
         "named twice"),
        (GPU.replace("limited: requests.nvidia.com/gpu=2", "limited: requests.cpu=2"),
         "same, non-empty resources"),
        (GPU.replace("requested: requests.nvidia.com/gpu=1",
                     "requested: " + ",".join(f"r{i}=1" for i in range(33))),
         "over 32"),
        (GPU.replace("exceeded quota: gpu", "exceeded quota: " + "q" * 300), "quota"),
    ],
)  # fmt: skip
def test_figures_that_cannot_be_read_are_refused_with_the_reason(message: str, why: str) -> None:
    with pytest.raises(MappingError, match=why):
        parse_quota_refusal(message)


def test_hostile_text_costs_nothing_and_breaks_nothing() -> None:
    # a megabyte of commas, control characters and quotes: only the first 64 KiB is read
    junk = 'pods "\x00\n" is forbidden: ' + "," * 1_000_000 + GPU
    assert parse_quota_refusal(junk) is None
    assert not is_quota_refusal("FailedCreate", "x" * 100_000 + GPU)
    assert not is_quota_refusal("FailedScheduling", JOB)
    assert not is_quota_refusal("FailedCreate", None)
    odd = JOB.replace('"train-x7k2p"', '"tr\u202eain"')  # a name the API would refuse: kept
    r = parse_quota_refusal(odd)
    assert r is not None and r.pod == "tr\u202eain"


# --- through the watcher (the fake API server) ------------------------------------------------


async def test_the_event_watcher_keeps_quota_refusals_whatever_its_reasons(
    cluster: FakeCluster, server: FakeApiServer, api_client: ApiClient, collector: Collector
) -> None:
    """Kept on any owner kind, even with the default reasons (which do not name FailedCreate);
    another FailedCreate (a webhook's) is not kept; a refusal whose figures cannot be read is
    refused with its reason and raw form, and the rest goes on."""
    bad = JOB.replace("gpu=1", "gpu=lots")
    cluster.apply(failed_create("train", "ml", message=JOB, count=3))
    cluster.apply(failed_create("web-5d8c9", "shop", message=JOB, kind="ReplicaSet"))
    cluster.apply(failed_create("hooked", "ml", message="Error creating: admission webhook denied"))
    cluster.apply(failed_create("broken", "ml", message=bad))
    registry, kept = CollectorRegistry(), Kept()
    refusals = RefusalLog(registry=registry, sink=kept)
    settings = kube_settings(KubeResource.EVENTS)
    assert "FailedCreate" not in settings.event_reasons
    async with running(api_client, settings, collector, registry=registry, refusals=refusals):
        await collector.wait_for(lambda: len(collector.envelopes) == 2, timeout=30)
        await collector.quiet()
    events = sorted(
        (e.payload.event for e in collector.envelopes if isinstance(e.payload, SchedulingEvent)),
        key=lambda e: e.object_kind or "",
    )
    assert [(e.object_kind, e.object_namespace, e.object_name, e.count) for e in events] == [
        ("Job", "ml", "train", 3),
        ("ReplicaSet", "shop", "web-5d8c9", 1),
    ]
    assert all(
        e.quota is not None and e.quota.requested == {"requests.nvidia.com/gpu": 1.0}
        for e in events
    )
    assert all(e.pod_name is None and e.message == JOB for e in events)
    assert refusals.counts == {("kube/events", "mapping"): 1}
    (refused,) = kept.refusals
    assert "ml/broken" in refused.detail and "not a quantity" in refused.detail
    assert "gpu=lots" in refused.raw
