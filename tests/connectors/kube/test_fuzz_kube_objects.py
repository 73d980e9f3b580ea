"""Fuzzing the Kubernetes edge: raw API objects (as JSON off the wire) through the client's
decode and gpufrag's mapping, for pods, nodes, ResourceQuotas and Kueue ClusterQueues.

Quantities, labels, annotations, priorities and times come from a mix of real values and
hostile ones (past 64 bits, negative, 10^999999, garbage text, wrong JSON types). The
invariant for every object: no exception escapes decode or the handler, and the object is
either emitted with every value in range (the envelopes serialize and read back equal) or
refused with a reason that names what was wrong.
"""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import event, given
from hypothesis import strategies as st
from kubernetes_asyncio.client import ApiClient
from prometheus_client import CollectorRegistry

from connectors.kube import KubeSource
from connectors.kube.objects import Undecodable
from connectors.refusals import RefusalLog
from models import Envelope, KubeResource, KubeSettings, from_json, to_json
from tests.fuzzing import fuzz

R = KubeResource
_LOOP = asyncio.new_event_loop()
"""One loop for every example: a loop per example would cost more than the example."""

QUANTITY: st.SearchStrategy[Any] = st.one_of(
    st.sampled_from(["500m", "2", "16Gi", "1", "8", "0", "100", "80Gi", "1.5", "250m"]),
    st.sampled_from(
        ["-1", "-500m", "100000000000000000", "1e30", "1e31", "1e999999E", "18446744073709551616"]
    ),
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=6),
    st.none(),
    st.just([1]),
)
RESOURCE = st.sampled_from(
    [
        "cpu",
        "memory",
        "nvidia.com/gpu",
        "nvidia.com/gpu.shared",
        "nvidia.com/gpumem",
        "nvidia.com/gpucores",
        "nvidia.com/mig-1g.10gb",
        "pods",
    ]
)
NUMBER_TEXT = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.sampled_from(["8", "0", "-1", "x", "", "1e3", "99999999999999999999999"]),
)
TIME = st.one_of(
    st.sampled_from(
        [
            "2026-01-01T00:00:00Z",
            "0001-01-01T00:00:00Z",
            "9999-12-31T23:59:59Z",
            "1969-07-20T20:17:00Z",
            "not-a-date",
            "",
        ]
    ),
    st.none(),
    st.integers(),
)


# Every strategy is built once, here: one built inside a composite is built and validated
# again at every draw, which took a third of these tests' time.
RESOURCES = st.dictionaries(RESOURCE, QUANTITY, max_size=5)
POD_LABELS = st.dictionaries(
    st.sampled_from(["kueue.x-k8s.io/queue-name", "kueue.x-k8s.io/pod-group-name", "app"]),
    st.text(max_size=5),
    max_size=2,
)
POD_NOTES = st.dictionaries(
    st.sampled_from(["kueue.x-k8s.io/pod-group-total-count", "scheduling.k8s.io/group-name"]),
    NUMBER_TEXT,
    max_size=2,
)
POD_NAME = st.sampled_from(["p", "q", ""])
PRIORITY = st.one_of(st.integers(-(2**70), 2**70), st.none(), st.text())
NODE_NAME = st.sampled_from([None, "n1"])
OVERHEAD = st.one_of(st.none(), RESOURCES)
PHASE = st.sampled_from(["Pending", "Running", "Bogus", None])
NODE_LABELS = st.dictionaries(
    st.sampled_from(
        [
            "nvidia.com/gpu.product",
            "nvidia.com/gpu.count",
            "nvidia.com/gpu.memory",
            "nvidia.com/gpu.replicas",
        ]
    ),
    st.one_of(NUMBER_TEXT, st.just("NVIDIA-A100-SXM4-80GB"), st.just("NVIDIA-H200")),
    max_size=4,
)
QUOTA_HARD = st.dictionaries(RESOURCE.map(lambda r: f"requests.{r}"), QUANTITY, max_size=3)
QUOTA_USED = st.dictionaries(RESOURCE, QUANTITY, max_size=3)
PENDING_WORKLOADS = st.one_of(st.integers(-(2**70), 2**70), st.text())
ADMITTED_WORKLOADS = st.integers(-5, 5)


@st.composite
def st_raw_pod(draw: st.DrawFn) -> dict[str, Any]:
    labels = draw(POD_LABELS)
    notes = draw(POD_NOTES)
    container = {
        "name": "main",
        "image": "x",
        "resources": {"requests": draw(RESOURCES), "limits": draw(RESOURCES)},
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": draw(POD_NAME),
            "namespace": "ml",
            "uid": "u-1",
            "resourceVersion": "7",
            "creationTimestamp": draw(TIME),
            "labels": labels,
            "annotations": notes,
        },
        "spec": {
            "containers": [container],
            "priority": draw(PRIORITY),
            "nodeName": draw(NODE_NAME),
            "overhead": draw(OVERHEAD),
        },
        "status": {"phase": draw(PHASE)},
    }


@st.composite
def st_raw_node(draw: st.DrawFn) -> dict[str, Any]:
    allocatable = draw(RESOURCES)
    labels = draw(NODE_LABELS)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n1", "uid": "u-2", "resourceVersion": "9", "labels": labels},
        "spec": {"unschedulable": draw(st.booleans())},
        "status": {"allocatable": allocatable, "capacity": allocatable},
    }


@st.composite
def st_raw_quota(draw: st.DrawFn) -> dict[str, Any]:
    hard = draw(QUOTA_HARD)
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "q", "namespace": "ml", "uid": "u-3", "resourceVersion": "3"},
        "spec": {"hard": hard},
        "status": {"hard": hard, "used": draw(QUOTA_USED)},
    }


@st.composite
def st_raw_cluster_queue(draw: st.DrawFn) -> dict[str, Any]:
    quota = {"name": "nvidia.com/gpu", "nominalQuota": draw(QUANTITY)}
    if draw(st.booleans()):
        quota["borrowingLimit"] = draw(QUANTITY)
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "ClusterQueue",
        "metadata": {"name": "cq", "uid": "u-4", "resourceVersion": "4"},
        "spec": {
            "cohort": "c",
            "resourceGroups": [{"flavors": [{"name": "f", "resources": [quota]}]}],
        },
        "status": {
            "pendingWorkloads": draw(PENDING_WORKLOADS),
            "admittedWorkloads": draw(ADMITTED_WORKLOADS),
        },
    }


class Edge:
    """The source's own decode and handlers for one resource, without the network."""

    def __init__(self, resource: KubeResource) -> None:
        self.emitted: list[Envelope] = []
        self.refusals = RefusalLog(registry=CollectorRegistry())

        async def build() -> KubeSource:
            return KubeSource(
                api_client=ApiClient(),
                settings=KubeSettings(resources=[resource]),
                emit=self._emit,
                registry=CollectorRegistry(),
                refusals=self.refusals,
            )

        self.source = _LOOP.run_until_complete(build())
        self.reflector = self.source.reflectors[resource]

    async def _emit(self, env: Envelope) -> None:
        self.emitted.append(env)

    def feed(self, raw: dict[str, Any]) -> tuple[list[Envelope], list[str]]:
        """What one object gives: its envelopes, and the reasons it was refused for."""
        before = self.refusals.total()
        obj = self.reflector.client.read(raw)
        if isinstance(obj, Undecodable):  # the reflector refuses these itself, with this
            return [], [obj.error]
        _, out = _LOOP.run_until_complete(self.reflector.handler.upsert(obj, None))
        refused = self.refusals.total() - before
        assert refused <= 1
        last = self.refusals.last
        return out, [last.detail] if refused and last is not None else []


EDGES: dict[KubeResource, Edge] = {}


def _edge(resource: KubeResource) -> Edge:
    if resource not in EDGES:
        EDGES[resource] = Edge(resource)
    return EDGES[resource]


def _check(resource: KubeResource, raw: dict[str, Any], primary: type[Any]) -> None:
    out, refused = _edge(resource).feed(raw)
    for env in out:  # every value in range: serializes (64-bit ints) and reads back equal
        assert from_json(Envelope, to_json(env)) == env
    emitted = [e for e in out if isinstance(e.payload, primary)]
    assert (len(emitted) == 1) != bool(refused), (raw, out, refused)
    event("refused" if refused else "emitted")  # --hypothesis-show-statistics: both happen
    assert all(reason.strip() for reason in refused)


@fuzz
@given(raw=st_raw_pod())
def test_pods_are_emitted_in_range_or_refused_with_a_reason(raw: dict[str, Any]) -> None:
    from models import PodEvent

    _check(R.PODS, raw, PodEvent)


@fuzz
@given(raw=st_raw_node())
def test_nodes_are_emitted_in_range_or_refused_with_a_reason(raw: dict[str, Any]) -> None:
    from models import NodeEvent

    _check(R.NODES, raw, NodeEvent)


@fuzz
@given(raw=st.one_of(st_raw_quota()))
def test_quotas_are_emitted_in_range_or_refused(raw: dict[str, Any]) -> None:
    from models import QueueEvent

    out, refused = _edge(R.RESOURCE_QUOTAS).feed(raw)
    for env in out:
        assert from_json(Envelope, to_json(env)) == env
    # a quota that limits no GPU maps to nothing (neither emitted nor refused)
    assert len([e for e in out if isinstance(e.payload, QueueEvent)]) + len(refused) <= 1


@fuzz
@given(raw=st_raw_cluster_queue())
def test_cluster_queues_are_emitted_in_range_or_refused(raw: dict[str, Any]) -> None:
    from models import QueueEvent

    out, refused = _edge(R.KUEUE_CLUSTER_QUEUES).feed(raw)
    for env in out:
        assert from_json(Envelope, to_json(env)) == env
    assert len([e for e in out if isinstance(e.payload, QueueEvent)]) + len(refused) == 1
