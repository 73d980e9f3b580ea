"""The near_memory_limit signal as a scenario table: each input with the signals it opens and
resolves, in event time. A HAMi pod limited to 8,000 MiB on a shared card, threshold 95 %
(7,600 MiB), held for 60 s."""

from __future__ import annotations

from datetime import datetime

import pytest

from models import (
    GpuState,
    NodeProfile,
    PodPhase,
    ResourceRequest,
    Signal,
    TaskProfile,
)
from models.cards import SharingMode
from models.settings import (
    NearMemoryLimitSettings,
)
from streams.cluster_analysis import ClusterAnalysis
from streams.fragmentation.shapes import TypicalPods
from streams.profiles.join import NodeProfileUpdate, ProfileUpdate, TaskProfileUpdate
from tests.streams.profiles_helpers import T0, at, only_detector

POD = "llm/lora-0"
OTHER = "llm/lora-1"
ONLY_THIS = only_detector("near_memory_limit", NearMemoryLimitSettings(threshold_pct=95, for_s=60))


def task(key: str, *, limit: int | None = 8_000) -> TaskProfileUpdate:
    profile = TaskProfile(
        key=key,
        uid=key,
        requests=ResourceRequest(
            cpu_milli=1_000, memory_mib=1_024, gpu_count=1, gpu_milli=1000, gpu_memory_mib=limit
        ),
        gpu_memory_limit_mib=limit,
        phase=PodPhase.RUNNING,
        node="v100-0",
        created_at=T0,
    )
    return TaskProfileUpdate(key, profile, at(0))


def node(t: float, **use: float) -> NodeProfileUpdate:
    """The node at event second ``t`` with each pod's own memory on card 0 (lora_0=7800)."""
    figures = {f"llm/{k.replace('_', '-')}": v for k, v in use.items()}
    card = GpuState(
        index=0,
        milli_free=500,
        mode=SharingMode.HAMI,
        units_free=1000,
        memory_free_mib=16_768,
        pods=(POD, OTHER),
        pod_memory_mib=figures,
        memory_total_mib=32_768.0,
        memory_used_mib=sum(figures.values()),
    )
    profile = NodeProfile(
        name="v100-0",
        gpu_model="V100M32",
        gpus=(card,),
        cpu_milli_allocatable=32_000,
        memory_mib_allocatable=131_072,
        pods=(POD, OTHER),
        updated_at=at(t),
    )
    return NodeProfileUpdate("v100-0", profile, at(t))


Step = tuple[ProfileUpdate | datetime, set[tuple[str, str]]]


def run(steps: list[Step]) -> ClusterAnalysis:
    a = ClusterAnalysis(
        detectors=ONLY_THIS, typical=TypicalPods(pods=(), coverage=1.0, observed_pods=0)
    )
    for i, (item, expected) in enumerate(steps):
        out: list[Signal] = []
        if isinstance(item, datetime):
            out += a.advance(item)
        else:
            out += a.apply(item)
            out += a.advance(item.at)
        got = {(s.state, s.scope_id) for s in out if s.kind == "near_memory_limit"}
        assert got == expected, f"step {i}: {item!r}"
    return a


def test_a_pod_held_at_its_limit_for_the_hold_time_opens_then_resolves_below_it() -> None:
    a = run(
        [
            (task(POD), set()),
            (task(OTHER, limit=None), set()),
            (node(10, lora_0=7_000, lora_1=20_000), set()),  # 87.5 %; lora-1 has no limit
            (node(20, lora_0=7_800), set()),  # 97.5 %: above since 20 s
            (at(79), set()),  # 59 s: not yet
            (at(80), {("open", POD)}),  # held 60 s, with no new reading needed
            (node(90, lora_0=7_900), set()),  # still open: nothing new
            (node(100, lora_0=4_000), {("resolved", POD)}),
        ]
    )
    assert a.next_due() is None


def test_a_dip_below_the_threshold_restarts_the_hold() -> None:
    run(
        [
            (task(POD), set()),
            (node(0, lora_0=7_700), set()),
            (node(50, lora_0=7_000), set()),  # dipped at 50 s
            (node(55, lora_0=7_700), set()),  # above again from 55 s
            (at(100), set()),  # 45 s since 55 s
            (at(115), {("open", POD)}),
        ]
    )


def test_the_signal_carries_the_figures() -> None:
    a = ClusterAnalysis(
        detectors=ONLY_THIS, typical=TypicalPods(pods=(), coverage=1.0, observed_pods=0)
    )
    a.apply(task(POD))
    a.apply(node(0, lora_0=7_800))
    a.advance(at(0))
    (signal,) = a.advance(at(60))
    assert signal.evidence == {
        "node": "v100-0",
        "gpu_index": 0,
        "used_mib": 7_800.0,
        "limit_mib": 8_000,
        "used_pct": 97.5,
        "above_since": at(0).isoformat(),
        "threshold_pct": 95.0,
    }


def test_a_pod_that_leaves_resolves_its_signal() -> None:
    run(
        [
            (task(POD), set()),
            (node(0, lora_0=7_800), set()),
            (at(60), {("open", POD)}),
            (TaskProfileUpdate(POD, None, at(70)), {("resolved", POD)}),
        ]
    )


def test_the_hold_survives_a_restart_of_the_host() -> None:
    a = ClusterAnalysis(
        detectors=ONLY_THIS, typical=TypicalPods(pods=(), coverage=1.0, observed_pods=0)
    )
    a.restore({})  # a host that persists its state records changes from here on
    a.apply(task(POD))
    a.apply(node(0, lora_0=7_800))
    a.advance(at(30))
    saved = {k: v for k, v in a.snapshot().items() if v is not None}
    b = ClusterAnalysis(
        detectors=ONLY_THIS, typical=TypicalPods(pods=(), coverage=1.0, observed_pods=0)
    )
    b.restore(saved)
    assert b.next_due() == at(60)
    assert [s.scope_id for s in b.advance(at(60))] == [POD]


@pytest.mark.parametrize("threshold", [0, 101])
def test_the_threshold_is_a_share_of_the_limit(threshold: float) -> None:
    with pytest.raises(ValueError, match="threshold_pct"):
        NearMemoryLimitSettings(threshold_pct=threshold)
