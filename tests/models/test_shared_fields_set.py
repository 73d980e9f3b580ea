"""Resident models share their set of given fields (``models.base.shared_fields_set``): the
memory of a 200,000-pod cluster view halved. What could go wrong is a shared set changed
through one instance and read through another: a copy with an update must get the update in
its own set and leave every other instance's as it was."""

from __future__ import annotations

from datetime import UTC, datetime

from models import GpuState, NodeProfile, PodPhase, ResourceRequest, TaskProfile, trusted

T0 = datetime(2026, 12, 6, tzinfo=UTC)


def _task(key: str) -> TaskProfile:
    return TaskProfile(
        key=key,
        uid=key,
        requests=ResourceRequest(cpu_milli=100, memory_mib=64, gpu_count=1, gpu_milli=1000),
        phase=PodPhase.PENDING,
        created_at=T0,
    )


def test_instances_given_the_same_fields_share_one_set() -> None:
    a, b = _task("ns/a"), _task("ns/b")
    assert a.model_fields_set is b.model_fields_set
    assert a.requests.model_fields_set is b.requests.model_fields_set
    assert a.model_fields_set == {"key", "uid", "requests", "phase", "created_at"}
    validated = TaskProfile.model_validate_json(a.model_dump_json(exclude_unset=True))
    assert validated.model_fields_set is a.model_fields_set
    # a different set of given fields is its own shared set
    c = a.model_copy(update={"node": "n1"})
    assert c.model_fields_set == a.model_fields_set | {"node"}
    assert c.model_fields_set is not a.model_fields_set


def test_a_copy_with_an_update_changes_no_other_instances_fields() -> None:
    a, b = _task("ns/a"), _task("ns/b")
    before = set(a.model_fields_set)
    c = a.model_copy(update={"preemptions": 1, "oom_count": 2})
    assert c.model_fields_set == before | {"preemptions", "oom_count"}
    assert a.model_fields_set == before and b.model_fields_set == before
    # what the given fields decide is unchanged for each
    assert a.model_dump(exclude_unset=True).keys() == before
    assert c.model_dump(exclude_unset=True)["oom_count"] == 2
    assert a.oom_count == 0 and c.oom_count == 2


def test_trusted_models_share_the_set_of_all_their_fields() -> None:
    values = GpuState(index=0, milli_free=1000).model_dump()
    one, two = trusted(GpuState, dict(values)), trusted(GpuState, dict(values))
    assert one.model_fields_set is two.model_fields_set
    assert one.model_fields_set == set(GpuState.model_fields)
    profile = NodeProfile(
        name="n1", cpu_milli_allocatable=1000, memory_mib_allocatable=1024, updated_at=T0
    )
    again = trusted(NodeProfile, dict(profile))  # every field, as validation gave it
    assert again == profile and again.model_fields_set == set(NodeProfile.model_fields)
