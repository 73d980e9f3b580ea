"""Envelope keys and ids decide partitioning and deduplication, so they are pinned here."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from models import (
    CLUSTER_KEY,
    SCHEMA_VERSION,
    Envelope,
    EventKind,
    GpuSample,
    GpuSampleEvent,
    Node,
    NodeEvent,
    Pod,
    PodEvent,
    QueueEvent,
    QueueObject,
    QueueSourceKind,
    ResourceRequest,
    SchedulerEvent,
    SchedulingEvent,
    from_json,
    key_of,
    to_json,
)

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


def _pod_event(change: str = "upsert") -> PodEvent:
    pod = Pod(
        namespace="ml",
        name="train-0",
        uid="u1",
        phase="Pending",
        requests=ResourceRequest(cpu_milli=4000, memory_mib=8192, gpu_count=2, gpu_milli=1000),
        created_at=T0,
    )
    return PodEvent.model_validate({"change": change, "pod": pod})


def test_keys_per_kind() -> None:
    assert key_of(_pod_event()) == "ml/train-0"
    node = Node(name="n1", cpu_milli=1, memory_mib=1, gpu_model="T4", gpu_count=1)
    assert key_of(NodeEvent(change="delete", node=node)) == "n1"
    assert key_of(GpuSampleEvent(sample=GpuSample(node="n2", gpu_index=0))) == "n2"
    ev = SchedulerEvent(
        reason="FailedScheduling", message="0/3 nodes are available: ...", pod_name="p", node="n3"
    )
    assert key_of(SchedulingEvent(event=ev)) == "default/p"
    on_node = SchedulerEvent(reason="SystemOOM", message="System OOM encountered", node="n3")
    assert key_of(SchedulingEvent(event=on_node)) == "n3"
    bare = SchedulerEvent(reason="Other", message="")
    assert key_of(SchedulingEvent(event=bare)) == CLUSTER_KEY


def test_wrap_derives_key_and_id() -> None:
    env = Envelope.wrap(_pod_event(), event_time=T0, source="kube")
    assert env.key == "ml/train-0"
    assert env.kind is EventKind.POD
    assert env.schema_version == SCHEMA_VERSION
    assert len(env.id) == 40
    # Pinned: the id must not depend on the process (no hash(), no randomness), or
    # redelivered messages would stop deduplicating after a restart. A new model field changes
    # it once (here Pod.gpu_memory_limit_mib, the request's HAMi and renamed-replica fields,
    # and Pod.labels), which is why it is pinned.
    assert env.id == "fedbf69b7e6d26c5df9c67c2f2e401fb5b8636e3"


def test_id_differs_when_anything_differs() -> None:
    base = Envelope.wrap(_pod_event(), event_time=T0, source="kube").id
    assert Envelope.wrap(_pod_event("delete"), event_time=T0, source="kube").id != base
    assert Envelope.wrap(_pod_event(), event_time=T0, source="trace").id != base
    later = T0.replace(second=1)
    assert Envelope.wrap(_pod_event(), event_time=later, source="kube").id != base
    # Two GPUs of one node sampled at the same instant must not dedupe into one message.
    a = Envelope.wrap(
        GpuSampleEvent(sample=GpuSample(node="n", gpu_index=0)), event_time=T0, source="dcgm"
    )
    b = Envelope.wrap(
        GpuSampleEvent(sample=GpuSample(node="n", gpu_index=1)), event_time=T0, source="dcgm"
    )
    assert a.key == b.key
    assert a.id != b.id


def test_explicit_id_is_kept_and_must_be_non_empty() -> None:
    assert Envelope.wrap(_pod_event(), event_time=T0, source="kube", id="x").id == "x"
    with pytest.raises(ValidationError, match="id"):
        Envelope.wrap(_pod_event(), event_time=T0, source="kube", id="")


def test_event_time_normalised_to_utc_in_bytes() -> None:
    env = Envelope.wrap(_pod_event(), event_time=T0, source="kube")
    assert b'"event_time":"2024-05-01T12:00:00Z"' in to_json(env)


def test_unknown_payload_kind_rejected() -> None:
    raw = to_json(Envelope.wrap(_pod_event(), event_time=T0, source="kube"))
    with pytest.raises(ValidationError, match="payload"):
        from_json(Envelope, raw.replace(b'"kind":"pod"', b'"kind":"volume"'))


def test_queue_keys_name_the_kind_and_scope() -> None:
    quota = QueueObject(source_kind=QueueSourceKind.RESOURCE_QUOTA, namespace="ml", name="gpu")
    cq = QueueObject(source_kind=QueueSourceKind.CLUSTER_QUEUE, name="team-a")
    assert key_of(QueueEvent(change="upsert", queue=quota)) == "ResourceQuota:ml/gpu"
    assert key_of(QueueEvent(change="delete", queue=cq)) == "ClusterQueue:team-a"
    env = Envelope.wrap(QueueEvent(change="upsert", queue=cq), event_time=T0, source="kube")
    assert env.kind is EventKind.QUEUE
