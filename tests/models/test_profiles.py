"""Derived numbers that analyses read straight off the profiles and signals."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given

from models import (
    GpuState,
    NodeProfile,
    ResourceRequest,
    Scope,
    Signal,
    SignalKind,
    TaskProfile,
    fingerprint_of,
)
from tests.models.result_strategies import st_node_profile

T0 = datetime(2024, 1, 1, tzinfo=UTC)


def test_node_profile_free_capacity() -> None:
    profile = NodeProfile(
        name="n",
        gpu_model="A100",
        gpus=(
            GpuState(index=0, milli_free=1000),
            GpuState(index=1, milli_free=300),
            GpuState(index=2, milli_free=1000, healthy=False, last_xid=79),
        ),
        cpu_milli_allocatable=8000,
        cpu_milli_requested=9000,
        memory_mib_allocatable=1024,
        memory_mib_requested=24,
        pods=("b/x", "a/y"),
        updated_at=T0,
    )
    assert profile.cpu_milli_free == 0
    assert profile.memory_mib_free == 1000
    assert profile.gpu_milli_free_total == 1300
    assert profile.full_free_gpus == 1
    assert profile.pods == ("a/y", "b/x")


@given(st_node_profile())
def test_free_gpu_bounds(profile: NodeProfile) -> None:
    assert 0 <= profile.full_free_gpus * 1000 <= profile.gpu_milli_free_total
    assert profile.gpu_milli_free_total <= 1000 * len(profile.gpus)
    assert list(profile.pods) == sorted(profile.pods)


def test_task_wait() -> None:
    req = ResourceRequest(cpu_milli=1, memory_mib=1)
    task = TaskProfile(key="ns/p", uid="u", requests=req, phase="Pending", created_at=T0)
    assert task.wait_s is None
    bound = task.model_copy(update={"bound_at": T0 + timedelta(seconds=90.5)})
    assert bound.wait_s == 90.5


def test_fingerprint_is_stable_and_unambiguous() -> None:
    fp = fingerprint_of(SignalKind.FRAGMENTATION, Scope.NODE, "n1", "a")
    # Pinned: must never change across processes or releases (sinks dedupe on it).
    assert fp == "4af0d6322f0d720a"
    assert fingerprint_of(SignalKind.FRAGMENTATION, Scope.NODE, "n1", "a/b", "c") != (
        fingerprint_of(SignalKind.FRAGMENTATION, Scope.NODE, "n1", "a", "b/c")
    )
    assert fingerprint_of(SignalKind.FRAGMENTATION, Scope.NODE, "n1") != (
        fingerprint_of(SignalKind.FRAGMENTATION, Scope.POOL, "n1")
    )


def test_signal_resolve() -> None:
    fp = fingerprint_of(SignalKind.OOM_STORM, Scope.NODE, "n1")
    sig = Signal(
        kind=SignalKind.OOM_STORM,
        scope=Scope.NODE,
        scope_id="n1",
        severity="warning",
        fingerprint=fp,
        summary="3 OOM kills in 60 s",
        evidence={"kills": 3},
        opened_at=T0,
    )
    done = sig.resolved(T0 + timedelta(minutes=5))
    assert (done.state, done.resolved_at) == ("resolved", T0 + timedelta(minutes=5))
    assert sig.state == "open"
