"""The capacity index rebuilds a node's row only when what the row reads changed
(``row_key``): a GPU sample that moves a card's memory in use or its health clock leaves the
row, its totals and ``version`` as they were. Checked against a fresh index per profile: after
any sequence of profiles of one node, in any sharing mode, with bindings and telemetry changed
at random, the kept row and totals equal those of an index that saw only the last profile, and
``version`` moved exactly when that row changed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from models import Node, NodeProfile, PodPhase, ResourceRequest, TaskProfile
from streams.fragmentation.capacity import CapacityIndex
from streams.fragmentation.measure import FragMeasure
from streams.fragmentation.shapes import PodShape, TypicalPod, TypicalPods
from streams.profiles.join import node_profile
from tests.streams.card_strategies import nodes, requests

T0 = datetime(2026, 12, 6, tzinfo=UTC)
TYPICAL = TypicalPods(
    pods=(
        TypicalPod(PodShape(cpu_milli=4_000, gpu_milli=500, gpu_count=1), 0.5),
        TypicalPod(PodShape(cpu_milli=8_000, gpu_milli=1000, gpu_count=2), 0.5),
    ),
    coverage=1.0,
    observed_pods=2,
)

TELEMETRY = st.fixed_dictionaries(
    {},
    optional={
        "memory_used_mib": st.floats(0, 81_920),
        "memory_total_mib": st.sampled_from([None, 24_576.0, 81_920.0]),
        "last_xid": st.sampled_from([None, 13, 79]),
        "healthy": st.booleans(),
        "quiet_held": st.booleans(),
        "quiet_since": st.sampled_from([None, T0]),
    },
)


def _row(ix: CapacityIndex) -> tuple[object, ...]:
    i = ix.slot["n"]
    w = int(ix.gpu_count[i])
    arrays = (ix.gpu_free, ix.cores_free, ix.hmem_free, ix.replicas_free, ix.slots_free)
    scalars = (ix.cpu_free, ix.mem_free, ix.cpu_alloc, ix.mem_alloc, ix.gpu_cards, ix.rule)
    return (
        tuple(a[i, :w].tolist() for a in arrays),
        tuple(int(a[i]) for a in scalars),
        (int(ix.fixed[i]), int(ix.hami_memory[i]), int(ix.mig_idle[i]), bool(ix.unschedulable[i])),
        (ix.mig_free.get(i), ix.single.get(i), ix.taints.get(i), ix.models[i], ix.pools[i]),
        (float(ix.node_frag[i]), int(ix.node_idle[i]), int(ix.node_unhealthy[i])),
        (ix.frag_milli, ix.idle_milli, ix.capacity_milli, ix.whole_idle_cards),
        {k: (t.cards, t.idle_milli, t.unhealthy) for k, t in ix.groups.items()},
        ix.state(i),
    )


def _fresh(profile: NodeProfile) -> CapacityIndex:
    ix = CapacityIndex(FragMeasure(TYPICAL))
    ix.upsert(profile)
    return ix


def _with_telemetry(profile: NodeProfile, changes: list[dict[str, object]]) -> NodeProfile:
    gpus = tuple(
        g.model_copy(update=c) if c else g
        for g, c in zip(profile.gpus, changes + [{}] * len(profile.gpus), strict=False)
    )
    return profile.model_copy(update={"gpus": gpus})


@settings(max_examples=300)
@given(
    node=nodes(),
    steps=st.lists(
        st.tuples(
            # the pods bound at this step; None: the same as before (a GPU sample's step)
            st.none() | st.lists(requests(), max_size=4),
            st.lists(TELEMETRY, max_size=4),  # and what the cards' samples say
        ),
        min_size=1,
        max_size=8,
    ),
)
def test_a_row_is_rebuilt_exactly_when_what_it_reads_changed(
    node: Node, steps: list[tuple[list[ResourceRequest] | None, list[dict[str, object]]]]
) -> None:
    kept = CapacityIndex(FragMeasure(TYPICAL))
    before: tuple[object, ...] | None = None
    tasks: list[TaskProfile] = []
    for n, (reqs, telemetry) in enumerate(steps):
        tasks = (
            tasks
            if reqs is None
            else [
                TaskProfile(
                    key=f"ns/p{k}",
                    uid=f"p{k}",
                    requests=r,
                    phase=PodPhase.RUNNING,
                    node="n",
                    created_at=T0,
                )
                for k, r in enumerate(reqs)
            ]
        )
        profile = _with_telemetry(
            node_profile(node, tasks, {}, at=T0 + timedelta(seconds=n)), telemetry
        )
        version = kept.version
        changed = kept.upsert(profile)
        now = _row(kept)
        assert now == _row(_fresh(profile))
        assert (kept.version != version) == changed
        if before is not None and not changed:
            assert now == before
        before = now
    # a profile with only a card's memory in use and its last XID moved changes nothing
    if profile.gpus:
        sample = {"memory_used_mib": 1.0, "last_xid": 13, "pod_memory_mib": {"ns/x": 1.0}}
        last = _with_telemetry(profile, [sample])
        assert not kept.upsert(last)
        assert _row(kept) == _row(_fresh(last))
