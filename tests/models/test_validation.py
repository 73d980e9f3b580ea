"""Bad input must fail at the edge with an error naming the field, so dead letters explain
themselves."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from models import (
    SCHEMA_VERSION,
    Action,
    Envelope,
    GangRef,
    GpuSample,
    GpuState,
    Node,
    NodeProfile,
    Pod,
    PodEvent,
    ResourceRequest,
    SchedulerEvent,
    Signal,
    TaskProfile,
    check_gpu_model,
    from_json,
    to_json,
)

T0 = datetime(2024, 1, 1, tzinfo=UTC)
REQ: dict[str, Any] = {"cpu_milli": 1000, "memory_mib": 1024, "gpu_count": 1, "gpu_milli": 1000}
POD: dict[str, Any] = {
    "name": "p",
    "uid": "u",
    "phase": "Running",
    "requests": REQ,
    "created_at": T0,
}
NODE: dict[str, Any] = {
    "name": "n",
    "cpu_milli": 1,
    "memory_mib": 1,
    "gpu_model": "T4",
    "gpu_count": 1,
}
SAMPLE: dict[str, Any] = {"node": "n", "gpu_index": 0}
PROFILE: dict[str, Any] = {
    "name": "n",
    "gpu_model": "A100",
    "cpu_milli_allocatable": 1,
    "memory_mib_allocatable": 1,
    "updated_at": T0,
    "gpus": [{"index": 0, "milli_free": 1000}],
}
TASK: dict[str, Any] = {
    "key": "ns/p",
    "uid": "u",
    "requests": REQ,
    "phase": "Pending",
    "created_at": T0,
}
SIGNAL: dict[str, Any] = {
    "kind": "oom_storm",
    "scope": "node",
    "scope_id": "n",
    "severity": "critical",
    "fingerprint": "0123456789abcdef",
    "summary": "s",
    "opened_at": T0,
}
ACTION: dict[str, Any] = {
    "id": "a",
    "kind": "reclaim",
    "outcome": "proposed",
    "target_scope": "pod",
    "target": "ns/p",
    "reason": "r",
    "created_at": T0,
}
ENVELOPE: dict[str, Any] = {
    "id": "e",
    "key": "default/p",
    "event_time": T0,
    "source": "kube",
    "payload": {"kind": "pod", "change": "upsert", "pod": POD},
}


def _error_text(cls: type[BaseModel], data: dict[str, Any]) -> str:
    with pytest.raises(ValidationError) as info:
        cls.model_validate(data)
    return str(info.value)


def _locs(cls: type[BaseModel], data: dict[str, Any]) -> list[str]:
    with pytest.raises(ValidationError) as info:
        cls.model_validate(data)
    return [".".join(str(p) for p in e["loc"]) for e in info.value.errors()]


def test_valid_fixtures_are_valid() -> None:
    cases: list[tuple[type[BaseModel], dict[str, Any]]] = [
        (ResourceRequest, REQ),
        (Pod, POD),
        (Node, NODE),
        (GpuSample, SAMPLE),
        (NodeProfile, PROFILE),
        (TaskProfile, TASK),
        (Signal, SIGNAL),
        (Action, ACTION),
        (Envelope, ENVELOPE),
    ]
    for cls, data in cases:
        cls.model_validate(data)


@pytest.mark.parametrize(
    ("cls", "base", "field"),
    [
        (ResourceRequest, REQ, "cpu_milli"),
        (ResourceRequest, REQ, "memory_mib"),
        (ResourceRequest, REQ, "gpu_count"),
        (ResourceRequest, REQ, "gpu_milli"),
        (ResourceRequest, REQ, "gpu_memory_mib"),
        (ResourceRequest, REQ, "gpu_cores_pct"),
        (Node, NODE, "cpu_milli"),
        (Node, NODE, "memory_mib"),
        (Node, NODE, "gpu_count"),
        (Node, NODE, "gpu_memory_mib"),
        (Node, NODE, "gpu_replicas"),
        (GpuSample, SAMPLE, "gpu_index"),
        (GpuSample, SAMPLE, "memory_total_mib"),
        (GpuSample, SAMPLE, "memory_used_mib"),
        (GpuSample, SAMPLE, "memory_reserved_mib"),
        (GpuSample, SAMPLE, "utilization_pct"),
        (GpuSample, SAMPLE, "engine_active"),
        (GpuSample, SAMPLE, "xid"),
        (NodeProfile, PROFILE, "cpu_milli_allocatable"),
        (NodeProfile, PROFILE, "memory_mib_requested"),
        (TaskProfile, TASK, "oom_count"),
    ],
)
def test_negative_numbers_rejected(cls: type[BaseModel], base: dict[str, Any], field: str) -> None:
    assert field in _locs(cls, {**base, field: -1})


@pytest.mark.parametrize(
    ("cls", "data", "loc"),
    [
        (Pod, {**POD, "gpu_indices": [-1], "node": "n"}, "gpu_indices.0"),
        (SchedulerEvent, {"reason": "Evicted", "message": "", "count": 0}, "count"),
        (GangRef, {"name": "g", "min_member": 0}, "min_member"),
        (GpuState, {"index": 0, "milli_free": -1}, "milli_free"),
        (GpuState, {"index": 0, "milli_free": 1001}, "milli_free"),
        (ResourceRequest, {**REQ, "mig": {"1g.5gb": -1}}, "mig.1g.5gb"),
        (GpuSample, {**SAMPLE, "utilization_pct": 100.5}, "utilization_pct"),
        (GpuSample, {**SAMPLE, "engine_active": 1.5}, "engine_active"),
        (ResourceRequest, {**REQ, "cpu_milli": float("nan")}, "cpu_milli"),
        (GpuSample, {**SAMPLE, "memory_used_mib": float("inf")}, "memory_used_mib"),
        (Signal, {**SIGNAL, "evidence": {"x": float("nan")}}, "evidence.x.float"),
    ],
)
def test_out_of_range_rejected(cls: type[BaseModel], data: dict[str, Any], loc: str) -> None:
    assert loc in _locs(cls, data)


@pytest.mark.parametrize(
    ("cls", "base", "field"),
    [
        (ResourceRequest, REQ, "cpu_milli"),
        (ResourceRequest, REQ, "memory_mib"),
        (Pod, POD, "name"),
        (Pod, POD, "uid"),
        (Pod, POD, "phase"),
        (Pod, POD, "requests"),
        (Pod, POD, "created_at"),
        (Node, NODE, "name"),
        (Node, NODE, "cpu_milli"),
        (GpuSample, SAMPLE, "node"),
        (GpuSample, SAMPLE, "gpu_index"),
        (NodeProfile, PROFILE, "updated_at"),
        (TaskProfile, TASK, "key"),
        (Signal, SIGNAL, "fingerprint"),
        (Action, ACTION, "created_at"),
        (Envelope, ENVELOPE, "id"),
        (Envelope, ENVELOPE, "event_time"),
        (Envelope, ENVELOPE, "payload"),
    ],
)
def test_missing_required_field(cls: type[BaseModel], base: dict[str, Any], field: str) -> None:
    data = {k: v for k, v in base.items() if k != field}
    assert _locs(cls, data) == [field]


def test_unknown_field_rejected() -> None:
    assert _locs(Pod, {**POD, "nodeName": "n"}) == ["nodeName"]


@pytest.mark.parametrize(("count", "milli"), [(0, 500), (1, 0), (2, 500), (3, 0), (0, 1000)])
def test_gpu_milli_inconsistent_with_gpu_count(count: int, milli: int) -> None:
    text = _error_text(ResourceRequest, {**REQ, "gpu_count": count, "gpu_milli": milli})
    assert "gpu_milli" in text
    assert "gpu_count" in text


def test_gpu_share_consistent_cases() -> None:
    shared = ResourceRequest(cpu_milli=0, memory_mib=0, gpu_count=1, gpu_milli=250)
    assert shared.is_shared_gpu
    assert shared.total_gpu_milli == 250
    whole = ResourceRequest(cpu_milli=0, memory_mib=0, gpu_count=8, gpu_milli=1000)
    assert not whole.is_shared_gpu
    assert whole.total_gpu_milli == 8000
    cpu_only = ResourceRequest(cpu_milli=1, memory_mib=1)
    assert (cpu_only.total_gpu_milli, cpu_only.is_shared_gpu) == (0, False)


def test_hami_limits_need_a_gpu() -> None:
    text = _error_text(ResourceRequest, {"cpu_milli": 1, "memory_mib": 1, "gpu_memory_mib": 1})
    assert "gpu_memory_mib" in text


@pytest.mark.parametrize(
    ("cls", "data", "loc"),
    [
        (Pod, {**POD, "gpu_models": ["T4", "X 100"]}, "gpu_models.1"),
        (Node, {**NODE, "gpu_model": "X 100"}, "gpu_model"),
        (NodeProfile, {**PROFILE, "gpu_model": "X 100"}, "gpu_model"),
        (TaskProfile, {**TASK, "gpu_models": ["X 100"]}, "gpu_models.0"),
    ],
)
def test_a_gpu_model_must_be_a_name(cls: type[BaseModel], data: dict[str, Any], loc: str) -> None:
    assert _locs(cls, data) == [loc]
    assert "'X 100' is not a GPU model name" in _error_text(cls, data)


def test_gpu_models_are_an_open_set_in_one_spelling() -> None:
    assert check_gpu_model("H200") == "H200"
    assert check_gpu_model("h200") == "H200"  # one card, one name
    assert check_gpu_model("V100M32") == "V100M32"
    assert check_gpu_model("rtx-6000-ada-generation") == "RTX-6000-ADA-GENERATION"
    assert Node.model_validate({**NODE, "gpu_model": "h20"}).gpu_model == "H20"
    for bad in ("", " ", "-H20", "H20!", "X" * 65):
        with pytest.raises(ValueError, match="is not a GPU model name"):
            check_gpu_model(bad)


def test_node_gpu_model_iff_gpus() -> None:
    assert "gpu_model" in _error_text(Node, {**NODE, "gpu_model": None})
    assert "gpu_model" in _error_text(Node, {**NODE, "gpu_count": 0})
    Node.model_validate({**NODE, "gpu_count": 0, "gpu_model": None})
    # MIG-only nodes advertise no whole GPUs but keep their card model.
    Node.model_validate({**NODE, "gpu_count": 0, "mig_devices": {"1g.10gb": 7}})


NAIVE = datetime(2024, 1, 1)


@pytest.mark.parametrize(
    ("cls", "data", "loc"),
    [
        (Pod, {**POD, "created_at": NAIVE}, "created_at"),
        (Pod, {**POD, "created_at": "2024-01-01T00:00:00"}, "created_at"),
        (Envelope, {**ENVELOPE, "event_time": NAIVE}, "event_time"),
        (
            Envelope,
            {
                **ENVELOPE,
                "payload": {"kind": "pod", "change": "upsert", "pod": {**POD, "created_at": NAIVE}},
            },
            "payload.pod.pod.created_at",
        ),
        (NodeProfile, {**PROFILE, "updated_at": NAIVE}, "updated_at"),
        (TaskProfile, {**TASK, "bound_at": NAIVE}, "bound_at"),
        (Signal, {**SIGNAL, "opened_at": NAIVE}, "opened_at"),
        (Action, {**ACTION, "created_at": NAIVE}, "created_at"),
    ],
)
def test_naive_datetime_rejected(cls: type[BaseModel], data: dict[str, Any], loc: str) -> None:
    assert _locs(cls, data) == [loc]
    assert "naive datetime not allowed" in _error_text(cls, data)


def test_offset_datetime_normalised_to_utc() -> None:
    pod = Pod.model_validate({**POD, "created_at": "2024-01-01T08:00:00+08:00"})
    assert pod.created_at == T0
    assert pod.created_at.tzinfo is UTC


def test_schema_version_from_the_future() -> None:
    raw = to_json(Envelope.model_validate(ENVELOPE))
    future = raw.replace(
        f'"schema_version":{SCHEMA_VERSION}'.encode(),
        f'"schema_version":{SCHEMA_VERSION + 1}'.encode(),
    )
    with pytest.raises(ValidationError) as info:
        from_json(Envelope, future)
    assert [e["loc"] for e in info.value.errors()] == [("schema_version",)]
    assert "newer than the supported" in str(info.value)
    assert "schema_version" in _locs(Envelope, {**ENVELOPE, "schema_version": 0})


def test_gpu_sample_used_above_total() -> None:
    text = _error_text(GpuSample, {**SAMPLE, "memory_total_mib": 10, "memory_used_mib": 11})
    assert "memory_used_mib" in text


def test_pod_indices_need_node_and_are_unique() -> None:
    assert "gpu_indices" in _error_text(Pod, {**POD, "gpu_indices": [0]})
    assert "duplicates" in _error_text(Pod, {**POD, "node": "n", "gpu_indices": [1, 1]})


def test_signal_state_matches_resolved_at() -> None:
    assert "resolved_at" in _error_text(Signal, {**SIGNAL, "state": "resolved"})
    assert "resolved_at" in _error_text(Signal, {**SIGNAL, "resolved_at": T0})
    assert "fingerprint" in _locs(Signal, {**SIGNAL, "fingerprint": "XYZ"})


def test_dry_run_cannot_execute() -> None:
    # blocked (a PDB's 429) and gone (a 404) are answers of the API server, like executed
    for outcome in ("executed", "blocked", "gone"):
        assert "dry_run" in _error_text(Action, {**ACTION, "outcome": outcome})
        Action.model_validate({**ACTION, "outcome": outcome, "mode": "enforce"})


def test_models_are_frozen() -> None:
    pod = Pod.model_validate(POD)
    with pytest.raises(ValidationError):
        pod.name = "other"  # type: ignore[misc]


def test_pod_event_change_literal() -> None:
    assert "change" in _locs(PodEvent, {"change": "patch", "pod": POD})


def test_task_key_format() -> None:
    assert "key" in _locs(TaskProfile, {**TASK, "key": "no-namespace"})
