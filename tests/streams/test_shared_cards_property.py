"""Property (issue 12): whatever pods are bound to a node, in any sharing mode, no card is more
than fully allocated, the node's allocated share never exceeds its cards, and every device or
instance the pods hold is either on a card or counted as unplaced (nothing vanishes)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from models import Node, PodPhase, ResourceRequest, TaskProfile
from models.cards import SharingMode
from streams.fragmentation.capacity import CapacityIndex
from streams.fragmentation.measure import FragMeasure
from streams.fragmentation.shapes import TypicalPods
from streams.profiles.card_layout import lay_cards
from streams.profiles.join import node_profile
from tests.streams.card_strategies import T0, nodes, requests


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
