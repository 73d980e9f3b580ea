"""Property: the profile join's state equals a from-scratch recomputation after any events.

Random event sequences over a small universe (3 nodes that come and go, a 4th node name that
pods may name but that never exists, 6 pods in one namespace) are fed to a fresh ``ProfileJoin``.
The expected profiles are then derived independently: a small reference walks the sequence
only to find each object's final state (last node/pod event, telemetry per card, the task
history fields), and the node profiles are computed from those final objects with a reference
card-allocation written here (not ``free_per_gpu`` or ``node_profile``).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from models import Envelope, GpuSample, Node, NodeEvent, NodeProfile, PodEvent, TaskProfile
from streams.profiles.health import health_step
from streams.profiles.join import (
    GpuTelemetry,
    NodeProfileUpdate,
    PeakReport,
    ProfileUpdate,
    TaskProfileUpdate,
    node_profile,
)
from streams.profiles.operators import DEFAULT_RULES, ProfileJoin
from tests.streams.profiles_reference import (
    CREATED,
    GHOST_NODE,
    NAMESPACE,
    NODE_NAMES,
    POD_NAMES,
    RECOVER_S,
    RefCard,
    Reference,
    RefTask,
    expected_node,
    expected_task,
    final_state,
    st_events,
    st_node,
    st_pod,
    without_time,
)

# --- the property --------------------------------------------------------------------------


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=st_events())
def test_profiles_equal_a_recomputation_after_any_event_sequence(events: list[Envelope]) -> None:
    join = ProfileJoin(rules=replace(DEFAULT_RULES, recover_after_s=RECOVER_S))
    outputs: list[ProfileUpdate] = []
    for env in events:
        outputs.extend(join.apply(env))
    ref = final_state(events)

    # node profiles: exactly the present nodes, each equal to the recomputation
    assert set(join.node_profiles) == set(ref.nodes)
    for name, node in ref.nodes.items():
        assert without_time(join.node_profiles[name]) == expected_node(node, ref), name

    # task profiles: exactly the live pods, each folded from its last upsert and its history
    assert set(join.tasks) == set(ref.tasks)
    for key, t in ref.tasks.items():
        got = join.tasks[key]
        assert (got.requests, got.phase, got.node) == (t.pod.requests, t.pod.phase, t.pod.node)
        assert got == expected_task(key, t), key
        # its memory peak, kept by the half of the node it is bound to
        held = join.node_states.get(t.pod.node) if t.pod.node is not None else None
        assert (None if held is None else held.peaks.get(key)) == t.peak, key

    # the emitted updates end in the final state
    last_node: dict[str, NodeProfile | None] = {}
    last_task: dict[str, TaskProfile | None] = {}
    last_peak: dict[str, float] = {}
    for out in outputs:
        if isinstance(out, NodeProfileUpdate):
            last_node[out.name] = out.profile
        elif isinstance(out, PeakReport):
            last_peak[out.key] = out.used_mib
        else:
            assert isinstance(out, TaskProfileUpdate)
            last_task[out.key] = out.profile
    for name in (*NODE_NAMES, GHOST_NODE):
        if name in ref.nodes:
            assert last_node[name] == join.node_profiles[name]
        else:
            assert last_node.get(name) is None
    for name in POD_NAMES:
        key = f"{NAMESPACE}/{name}"
        if key in ref.tasks:
            assert last_task[key] == join.tasks[key]
            if ref.tasks[key].peak is not None:  # the latest report is the peak kept
                assert last_peak[key] == ref.tasks[key].peak
        else:
            assert last_task.get(key) is None

    # idempotent: replaying the final upserts (later, redelivered) changes and emits nothing
    again = (events[-1].event_time if events else CREATED) + timedelta(seconds=5)
    before_nodes, before_tasks = dict(join.node_profiles), dict(join.tasks)
    for key, t in sorted(ref.tasks.items()):
        env = Envelope.wrap(PodEvent(change="upsert", pod=t.pod), event_time=again, source="test")
        assert join.apply(env) == [], key
    for name, node in sorted(ref.nodes.items()):
        env = Envelope.wrap(NodeEvent(change="upsert", node=node), event_time=again, source="t")
        assert join.apply(env) == [], name
    assert join.node_profiles == before_nodes
    assert join.tasks == before_tasks


@st.composite
def st_crowded_node(draw: st.DrawFn) -> tuple[Node, list[TaskProfile], Reference]:
    """One node with up to 12 pods naming it (some finished, some overcommitting) and telemetry."""
    node = draw(st_node()).model_copy(update={"name": "n0"})
    pods = draw(
        st.lists(
            st_pod(names=st.sampled_from([f"q{i:02}" for i in range(12)]), nodes=st.just("n0")),
            max_size=12,
            unique_by=lambda p: p.name,
        )
    )
    ref = Reference(nodes={"n0": node})
    for pod in pods:
        ref.tasks[pod.key] = RefTask(pod=pod)
    for i in draw(st.lists(st.integers(0, 9), unique=True, max_size=9)):
        ref.cards.setdefault("n0", {})[i] = RefCard(
            memory_total_mib=draw(st.none() | st.just(16384.0)),
            memory_used_mib=draw(st.none() | st.just(100.0)),
            last_xid=draw(st.none() | st.sampled_from([13, 48, 64, 74, 79, 95])),
        )
        ref.cards["n0"][i].read(ref.cards["n0"][i].last_xid, CREATED)
    tasks = [expected_task(k, t) for k, t in ref.tasks.items()]
    return node, tasks, ref


@settings(max_examples=200, deadline=None)
@given(case=st_crowded_node())
def test_node_profile_equals_the_reference_on_crowded_nodes(
    case: tuple[Node, list[TaskProfile], Reference],
) -> None:
    """The pure derivation, on denser card sharing than the event property reaches."""
    node, tasks, ref = case
    telemetry = {
        (i, None): GpuTelemetry(
            c.memory_total_mib,
            c.memory_used_mib,
            c.last_xid,
            health=health_step(
                None,
                GpuSample(node="n0", gpu_index=i, xid=c.last_xid),
                CREATED,
                recover_after_s=RECOVER_S,
            ),
        )
        for i, c in ref.cards.get("n0", {}).items()
    }
    got = node_profile(node, tasks, telemetry, at=CREATED)
    assert got.updated_at == CREATED
    assert without_time(got) == expected_node(node, ref)
