"""The cluster's fragment does not depend on the order its nodes came in, or on their history:
a view restored from its table (nodes applied in key order) must read the same figure, to the
last digit, as the view that lived through every change, or the two runners' histories differ
after a worker restart (found by the chaos soak: 7.790448892571041 % against
7.790448892571034 %)."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from models import Node, NodeProfile, PodPhase, ResourceRequest, TaskProfile
from streams.fragmentation.capacity import CapacityIndex
from streams.fragmentation.measure import FragMeasure
from streams.fragmentation.shapes import PodShape, TypicalPod, TypicalPods
from streams.profiles.join import node_profile
from tests.streams.card_strategies import nodes, requests

T0 = datetime(2026, 12, 6, tzinfo=UTC)
# weights with long binary expansions, so node fragments are not round numbers
TYPICAL = TypicalPods(
    pods=(
        TypicalPod(PodShape(cpu_milli=4_000, gpu_milli=300, gpu_count=1), 0.3),
        TypicalPod(PodShape(cpu_milli=2_000, gpu_milli=700, gpu_count=1), 0.1),
        TypicalPod(PodShape(cpu_milli=8_000, gpu_milli=1000, gpu_count=2), 0.6),
    ),
    coverage=1.0,
    observed_pods=3,
)


def _profile(node: Node, name: str, reqs: list[ResourceRequest]) -> NodeProfile:
    node = node.model_copy(update={"name": name})
    tasks = [
        TaskProfile(
            key=f"ns/{name}-{k}",
            uid=f"{name}-{k}",
            requests=r,
            phase=PodPhase.RUNNING,
            node=name,
            created_at=T0,
        )
        for k, r in enumerate(reqs)
    ]
    return node_profile(node, tasks, {}, at=T0)


@settings(max_examples=200, deadline=None)
@given(
    cluster=st.lists(
        st.tuples(nodes(), st.lists(requests(), max_size=3), st.lists(requests(), max_size=3)),
        min_size=2,
        max_size=12,
    ),
    order=st.randoms(use_true_random=False),
)
def test_the_fragment_is_the_same_whatever_the_order_and_history(
    cluster: list[tuple[Node, list[ResourceRequest], list[ResourceRequest]]], order: object
) -> None:
    lived = CapacityIndex(FragMeasure(TYPICAL))
    final: dict[str, NodeProfile] = {}
    for i, (node, before, after) in enumerate(cluster):
        name = f"n{i:02}"
        lived.upsert(_profile(node, name, before))  # each node changed once on the way
        final[name] = _profile(node, name, after)
    names = sorted(final)
    order.shuffle(names)  # type: ignore[attr-defined]
    for name in names:
        lived.upsert(final[name])
    lived.upsert(_profile(cluster[0][0], "gone", cluster[0][1]))
    lived.remove("gone")

    restored = CapacityIndex(FragMeasure(TYPICAL))
    for name in sorted(final):
        restored.upsert(final[name])
    assert lived.frag_milli == restored.frag_milli
    assert lived.frag_amount_pct == restored.frag_amount_pct
