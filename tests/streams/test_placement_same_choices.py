"""Property: the cached, candidate-only FGD scoring chooses exactly what scoring afresh would.

The FGD policy keeps each node's score per pod shape and rescores only candidates changed
since; the measure adds per-card terms kept per (model, free cards); the fit filter reads one
column of the cards sorted high to low. Each is a shortcut that must not change a result, so
on random clusters and schedule/release sequences every decision is checked against a
reference that scores every candidate from the definitions written here, with the measure
compared to ``node_fragment`` to the last bit.
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streams.fragmentation.measure import FragMeasure, LegacyState, node_fragment, node_state
from streams.fragmentation.shapes import MILLI_PER_GPU, PodShape, TypicalPods
from streams.placement.cluster_arrays import SimCluster
from streams.placement.policies import make_policy
from streams.placement.sim_scheduler import Placement, SimScheduler
from streams.placement.spec import PodSpec
from tests.streams.placement_cases import Case, Op, st_node, st_shape


@st.composite
def st_repeating_case(draw: st.DrawFn) -> Case:
    """Few shapes, repeated: a shape's cached scores are read again after nodes changed."""
    n = draw(st.integers(1, 6))
    nodes = [draw(st_node(f"n{i}")) for i in range(n)]
    pool = draw(st.lists(st_shape(), min_size=1, max_size=4))
    ops = []
    for k in range(draw(st.integers(0, 40))):
        if draw(st.integers(0, 3)) == 0:
            ops.append(Op(release=draw(st.integers(0, 40)), pod=None))
        else:
            shape = draw(st.sampled_from(pool))
            ops.append(Op(release=None, pod=PodSpec(name=f"pod-{k}", shape=shape, memory_mib=0)))
    typical = draw(st.lists(st.sampled_from(pool) | st_shape(), max_size=6))
    return Case(
        nodes=nodes,
        tie_rank=draw(st.none() | st.permutations(list(range(n)))),
        typical=TypicalPods.from_shapes(typical),
        ops=ops,
        seed=0,
    )


def frag(state: LegacyState, typical: TypicalPods) -> float:
    return node_fragment(state, typical).frag_milli


def score(state: LegacyState, shape: PodShape, typical: TypicalPods) -> int:
    """The FGD score of a node state for a shape, from the paper: the best over the cards a
    shared pod may take, or the whole cards with least room that fit; -1 when it cannot go."""
    model, cpu, gpus = state
    if cpu < shape.cpu_milli or not (shape.gpu_count == 0 or shape.accepts_model(model)):
        return -1

    def sigmoid(after: list[int]) -> int:
        drop = frag(state, typical) - frag(node_state(model, cpu - shape.cpu_milli, after), typical)
        return int(1.0 / (1.0 + math.exp(-drop / 1000.0)) * 100)

    if shape.is_shared_gpu:
        options = [
            [g - shape.gpu_milli if k == j else g for k, g in enumerate(gpus)]
            for j in range(len(gpus))
            if gpus[j] >= shape.gpu_milli
        ]
        return max((sigmoid(after) for after in options), default=-1)
    after = list(gpus)
    need = shape.gpu_count
    for k in sorted(range(len(after)), key=lambda k: (after[k], k)):
        if need and after[k] >= shape.gpu_milli:
            after[k] -= shape.gpu_milli
            need -= 1
    return -1 if need else sigmoid(after)


def reference_choice(cluster: SimCluster, pod: PodSpec, typical: TypicalPods) -> Placement:
    shape = pod.shape
    fits = [
        i
        for i in range(len(cluster))
        if cluster.cpu_free[i] >= shape.cpu_milli
        and cluster.mem_free[i] >= pod.memory_mib
        and (shape.gpu_count == 0 or shape.accepts_model(cluster.models[i]))
        and sum(1 for g in cluster.gpus_of(i).tolist() if g >= shape.gpu_milli) >= shape.gpu_count
    ]
    assert fits, "the caller checked that the pod fits somewhere"
    scores = {i: score(cluster.state_of(i), shape, typical) for i in fits}
    best = max(scores.values())
    node = min((i for i in fits if scores[i] == best), key=lambda i: int(cluster.tie_rank[i]))
    free = cluster.gpus_of(node).tolist()
    if not shape.is_shared_gpu:
        ids = tuple(g for g, left in enumerate(free) if left == MILLI_PER_GPU)[: shape.gpu_count]
        return Placement(pod=pod, node=cluster.names[node], gpu_ids=ids)
    model, cpu, _ = cluster.state_of(node)
    per_card = {}
    for g, left in enumerate(free):
        if left >= shape.gpu_milli:
            after = [x - shape.gpu_milli if k == g else x for k, x in enumerate(free)]
            drop = frag(node_state(model, cpu, free), typical) - frag(
                node_state(model, cpu - shape.cpu_milli, after), typical
            )
            per_card[g] = int(1.0 / (1.0 + math.exp(-drop / 1000.0)) * 100)
    top = max(per_card.values())
    card = min(g for g, s in per_card.items() if s == top)
    return Placement(pod=pod, node=cluster.names[node], gpu_ids=(card,))


def check_shortcuts(cluster: SimCluster, typical: TypicalPods) -> None:
    for i in range(len(cluster)):
        state = cluster.state_of(i)
        # to the last bit, not approximately: scores truncate, so a last-bit change can flip one
        assert cluster.measure.frag_milli(state) == frag(state, typical)
    for milli in (1, 250, 500, 999, 1000):
        for count in range(cluster.gpu_free.shape[1] + 2):
            by_sum = (cluster.gpu_free >= milli).sum(axis=1) >= count
            assert (cluster.gpus_fit(milli, count) == by_sum).all()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=st_repeating_case())
def test_fgd_chooses_what_scoring_every_candidate_afresh_chooses(case: Case) -> None:
    rank = None if case.tie_rank is None else np.array(case.tie_rank, dtype=np.int64)
    cluster = SimCluster(case.nodes, measure=FragMeasure(case.typical), tie_rank=rank)
    scheduler = SimScheduler(cluster, make_policy("fgd", cluster), np.random.default_rng(0))
    scheduled: list[str] = []
    for op in case.ops:
        if op.pod is None:
            assert op.release is not None
            if scheduled:
                scheduler.release(scheduled[op.release % len(scheduled)])
        else:
            scheduled.append(op.pod.name)
            fits_somewhere = bool(cluster.feasible(op.pod).any())
            want = reference_choice(cluster, op.pod, case.typical) if fits_somewhere else None
            got = scheduler.schedule(op.pod)
            assert (got if isinstance(got, Placement) else None) == want
        check_shortcuts(cluster, case.typical)
