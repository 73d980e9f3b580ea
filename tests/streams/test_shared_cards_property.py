"""Property (issue 12): whatever pods are bound to a node, in any sharing mode, no card is more
than fully allocated, the node's allocated share never exceeds its cards, and every device or
instance the pods hold is either on a card or counted as unplaced (nothing vanishes)."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from models import Node, PodPhase, ResourceRequest, TaskProfile
from models.cards import SharingMode
from streams.fragmentation.capacity import CapacityIndex
from streams.fragmentation.measure import FragMeasure
from streams.fragmentation.shapes import TypicalPods
from streams.profiles.card_layout import lay_cards
from streams.profiles.join import node_profile

T0 = datetime(2026, 12, 2, tzinfo=UTC)
PROFILES = ("1g.10gb", "2g.20gb", "3g.40gb", "7g.80gb")


@st.composite
def nodes(draw: st.DrawFn) -> Node:
    mode = draw(st.sampled_from(list(SharingMode)))
    model = draw(st.sampled_from(["A100-80GB", "A30", "H100"]))
    fitting = PROFILES[:3] if model == "A30" else PROFILES
    mig = (
        draw(st.dictionaries(st.sampled_from(fitting), st.integers(1, 4), max_size=3))
        if mode is SharingMode.MIG
        else {}
    )
    cards = 0 if mode is SharingMode.MIG else draw(st.integers(1, 4))
    return Node(
        name="n",
        cpu_milli=64_000,
        memory_mib=262_144,
        gpu_model=model,
        gpu_count=cards,
        gpu_memory_mib=draw(st.sampled_from([None, 24_576, 81_920]))
        if mode is SharingMode.HAMI
        else None,
        gpu_replicas=draw(st.integers(2, 8))
        if mode in (SharingMode.TIME_SLICED, SharingMode.HAMI)
        else 1,
        gpu_sharing=None if mode is SharingMode.MIG else mode,
        mig_devices=mig or ({"1g.10gb": 1} if mode is SharingMode.MIG else {}),
    )


@st.composite
def requests(draw: st.DrawFn) -> ResourceRequest:
    count = draw(st.integers(0, 3))
    milli = 0 if count == 0 else (draw(st.integers(1, 1000)) if count == 1 else 1000)
    return ResourceRequest(
        cpu_milli=100,
        memory_mib=100,
        gpu_count=count,
        gpu_milli=milli,
        mig=draw(st.dictionaries(st.sampled_from(PROFILES), st.integers(1, 3), max_size=2)),
        gpu_memory_mib=draw(st.none() | st.integers(1, 90_000)) if count else None,
        gpu_cores_pct=draw(st.none() | st.integers(0, 100)) if count else None,
    )


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    node=nodes(),
    pods=st.lists(st.tuples(requests(), st.lists(st.integers(0, 5), max_size=3)), max_size=12),
)
def test_no_card_is_allocated_past_whole_in_any_mode(
    node: Node, pods: list[tuple[ResourceRequest, list[int]]]
) -> None:
    bound = [
        (f"ns/p{i}", r, tuple(sorted(set(ix))) if len(set(ix)) == r.gpu_count else ())
        for i, (r, ix) in enumerate(pods)
    ]
    layout = lay_cards(node, bound)
    for card in layout.cards:
        assert 0 <= card.free <= card.units
        assert 0 <= card.milli_free <= 1000
    # instances: each one held is on a card or unplaced, never more held than carved
    held_mig = sum(sum(r.mig.values()) for _, r, _ in bound)
    on_cards = sum(sum(c.mig_used.values()) for c in layout.cards)
    devices = sum(r.gpu_count for _, r, _ in bound)
    assert on_cards <= held_mig and layout.unplaced <= devices + held_mig
    if node.sharing is SharingMode.TIME_SLICED:
        used = sum(c.units - c.free for c in layout.cards if c.mode is SharingMode.TIME_SLICED)
        assert used + layout.unplaced - (held_mig - on_cards) == devices
    assert node_profile(node, [], {}, at=T0).gpus_allocated == 0
    tasks = [
        TaskProfile(key=k, uid=k, requests=r, phase=PodPhase.RUNNING, node="n", created_at=T0)
        for k, r, _ in bound
    ]
    profile = node_profile(node, tasks, {}, at=T0)
    assert all(0.0 <= g.alloc_fraction <= 1.0 for g in profile.gpus)
    assert profile.gpus_allocated <= len(profile.gpus) + 1e-9
    ix = CapacityIndex(FragMeasure(TypicalPods(pods=(), coverage=1.0, observed_pods=0)))
    ix.upsert(profile)
    assert 0 <= ix.idle_milli <= ix.capacity_milli
