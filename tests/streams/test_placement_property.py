"""Property: a bound pod never exceeds any node resource, under every placement policy.

Random small clusters take random schedule/release sequences. The test keeps its own books
from the returned ``Placement``s only (which pod holds which node and cards) and, after every
step, checks the cluster's arrays against them, checks each decision against a brute-force fit
check, and checks the running fragmentation against a brute-force FGD measure written here from
the definition.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from streams.fragmentation.measure import FragMeasure
from streams.fragmentation.shapes import PodShape, TypicalPods
from streams.placement.cluster_arrays import SimCluster
from streams.placement.policies import make_policy
from streams.placement.sim_scheduler import Placement, SimScheduler, Unschedulable
from streams.placement.spec import NodeSpec, PodSpec
from tests.streams.placement_cases import MILLI, POLICIES, Case, st_case

# --- the test's own books and brute-force checks -------------------------------------------


@dataclass
class Books:
    """Free resources per node, derived only from the node specs and the returned placements."""

    nodes: list[NodeSpec]
    bound: dict[str, Placement]

    def index(self, name: str) -> int:
        return [n.name for n in self.nodes].index(name)

    def used(self, i: int) -> tuple[int, int, list[int]]:
        cpu, mem, cards = 0, 0, [0] * self.nodes[i].gpu_count
        for p in self.bound.values():
            if p.node == self.nodes[i].name:
                cpu += p.pod.shape.cpu_milli
                mem += p.pod.memory_mib
                for g in p.gpu_ids:
                    cards[g] += p.pod.shape.gpu_milli
        return cpu, mem, cards

    def free(self, i: int) -> tuple[int, int, list[int]]:
        cpu, mem, cards = self.used(i)
        spec = self.nodes[i]
        return spec.cpu_milli - cpu, spec.memory_mib - mem, [MILLI - c for c in cards]


def model_allowed(shape: PodShape, model: str | None) -> bool:
    allowed = [m for m in shape.gpu_models.split("|") if m]
    return shape.gpu_count == 0 or not allowed or model in allowed


def fits(books: Books, i: int, pod: PodSpec) -> bool:
    cpu, mem, cards = books.free(i)
    s = pod.shape
    return (
        cpu >= s.cpu_milli
        and mem >= pod.memory_mib
        and model_allowed(s, books.nodes[i].gpu_model)
        and sum(1 for c in cards if c >= s.gpu_milli) >= s.gpu_count
    )


def brute_force_frag(books: Books, typical: TypicalPods) -> float:
    """The FGD measure from its definition, summed over nodes."""
    total = 0.0
    for i, spec in enumerate(books.nodes):
        cpu, _, cards = books.free(i)
        for tp in typical.pods:
            s = tp.shape
            allowed = [m for m in s.gpu_models.split("|") if m]
            unusable = (
                s.gpu_milli == 0
                or (allowed and spec.gpu_model not in allowed)
                or cpu < s.cpu_milli
                or sum(1 for c in cards if c >= s.gpu_milli) < s.gpu_count
            )
            if unusable:
                total += tp.freq * sum(cards)
            else:
                total += tp.freq * sum(c for c in cards if c < s.gpu_milli)
    return total


def check_cluster(cluster: SimCluster, books: Books, typical: TypicalPods) -> None:
    assert (cluster.cpu_free >= 0).all() and (cluster.mem_free >= 0).all()
    for i, spec in enumerate(books.nodes):
        row = cluster.gpu_free[i]
        assert ((row[: spec.gpu_count] >= 0) & (row[: spec.gpu_count] <= MILLI)).all()
        assert (row[spec.gpu_count :] == 0).all(), "cards the node does not have"
        cpu, mem, cards = books.used(i)
        assert int(cluster.cpu_capacity[i] - cluster.cpu_free[i]) == cpu, spec.name
        assert int(cluster.mem_capacity[i] - cluster.mem_free[i]) == mem, spec.name
        assert [MILLI - int(g) for g in row[: spec.gpu_count]] == cards, spec.name
    allocated = sum(p.pod.shape.total_gpu_milli for p in books.bound.values())
    assert cluster.allocated_milli == allocated
    assert cluster.frag_milli == pytest.approx(cluster.recompute_frag_milli(), rel=0, abs=1e-6)
    assert cluster.frag_milli == pytest.approx(brute_force_frag(books, typical), rel=0, abs=1e-6)


# --- the property --------------------------------------------------------------------------


@pytest.mark.parametrize("policy", POLICIES)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=st_case())
def test_a_bound_pod_never_exceeds_any_node_resource(policy: str, case: Case) -> None:
    rank = None if case.tie_rank is None else np.array(case.tie_rank, dtype=np.int64)
    cluster = SimCluster(case.nodes, measure=FragMeasure(case.typical), tie_rank=rank)
    scheduler = SimScheduler(
        cluster, make_policy(policy, cluster), np.random.default_rng(case.seed)
    )
    books = Books(nodes=case.nodes, bound={})
    scheduled: list[str] = []
    check_cluster(cluster, books, case.typical)
    for op in case.ops:
        if op.pod is None:
            assert op.release is not None
            name = scheduled[op.release % len(scheduled)] if scheduled else "never-seen"
            released = scheduler.release(name)
            assert released == books.bound.pop(name, None)
        else:
            pod = op.pod
            scheduled.append(pod.name)
            fitting = [i for i in range(len(case.nodes)) if fits(books, i, pod)]
            result = scheduler.schedule(pod)
            if isinstance(result, Unschedulable):
                assert result.pod == pod
                assert fitting == [], f"{pod} fits {[case.nodes[i].name for i in fitting]}"
            else:
                assert isinstance(result, Placement) and result.pod == pod
                i = books.index(result.node)
                assert i in fitting
                ids = result.gpu_ids
                assert len(ids) == pod.shape.gpu_count == len(set(ids))
                _, _, cards = books.free(i)
                assert all(0 <= g < len(cards) and cards[g] >= pod.shape.gpu_milli for g in ids)
                books.bound[pod.name] = result
        check_cluster(cluster, books, case.typical)
