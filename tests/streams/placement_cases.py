"""Small clusters for the placement tests: the hand-worked ones' shapes and builders, and random
clusters with schedule/release sequences for the property tests (the bound-pod property and the
same-choices property share them)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st

from streams.fragmentation.measure import FragMeasure
from streams.fragmentation.shapes import PodShape, TypicalPod, TypicalPods
from streams.placement.cluster_arrays import SimCluster
from streams.placement.spec import NodeSpec, PodSpec

HALF = PodShape(cpu_milli=1000, gpu_milli=500, gpu_count=1)
WHOLE = PodShape(cpu_milli=1000, gpu_milli=1000, gpu_count=1)
TYPICAL = TypicalPods(
    pods=(TypicalPod(HALF, 0.5), TypicalPod(WHOLE, 0.5)), coverage=1.0, observed_pods=2
)


def cluster(*nodes: NodeSpec, tie_rank: list[int] | None = None) -> SimCluster:
    rank = None if tie_rank is None else np.array(tie_rank, dtype=np.int64)
    return SimCluster(list(nodes), measure=FragMeasure(TYPICAL), tie_rank=rank)


def pod(name: str, shape: PodShape, memory_mib: int = 1024) -> PodSpec:
    return PodSpec(name=name, shape=shape, memory_mib=memory_mib)


MILLI = 1000
POLICIES = ("random", "dot-product", "gpu-clustering", "gpu-packing", "best-fit", "fgd")
MODELS = ("T4", "V100M16", "G2")
MODEL_CONSTRAINTS = ("", "", "", "T4", "G2", "V100M16", "T4|G2", "V100M16|G2", "P100")


_cpu = st.sampled_from([0, 1000, 1000, 2000, 4000, 8000, 32000])
_share = st.sampled_from([100, 250, 500, 700, 900]) | st.integers(1, 999)
_whole = st.sampled_from([1, 1, 2, 4]) | st.integers(1, 8)
_kind = st.sampled_from(["cpu", "share", "share", "whole", "whole"])
_models = st.sampled_from(MODEL_CONSTRAINTS)


@st.composite
def st_shape(draw: st.DrawFn) -> PodShape:
    """CPU-only, a share of one card, or whole cards; GPU pods may name allowed models."""
    kind = draw(_kind)
    cpu = draw(_cpu)
    if kind == "cpu":
        return PodShape(cpu_milli=cpu, gpu_milli=0, gpu_count=0)
    models = draw(_models)
    if kind == "share":
        return PodShape(cpu_milli=cpu, gpu_milli=draw(_share), gpu_count=1, gpu_models=models)
    return PodShape(cpu_milli=cpu, gpu_milli=MILLI, gpu_count=draw(_whole), gpu_models=models)


_shape = st_shape()


@st.composite
def st_node(draw: st.DrawFn, name: str) -> NodeSpec:
    count = draw(st.integers(0, 8))
    model = draw(st.sampled_from(MODELS) if count else st.none() | st.sampled_from(MODELS))
    return NodeSpec(
        name=name,
        cpu_milli=draw(st.sampled_from([0, 4000, 16000, 32000, 96000, 96000])),
        memory_mib=draw(st.sampled_from([0, 8192, 65536, 262144, 262144])),
        gpu_count=count,
        gpu_model=model,
    )


@dataclass(frozen=True, slots=True)
class Op:
    release: int | None  # index into the names scheduled so far (mod), or None: schedule
    pod: PodSpec | None


@st.composite
def st_ops(draw: st.DrawFn) -> list[Op]:
    ops = []
    for k in range(draw(st.integers(0, 30))):
        if draw(st.integers(0, 3)) == 0:
            ops.append(Op(release=draw(st.integers(0, 40)), pod=None))
        else:
            mem = draw(st.sampled_from([0, 1024, 1024, 8192, 65536]))
            ops.append(
                Op(release=None, pod=PodSpec(name=f"pod-{k}", shape=draw(_shape), memory_mib=mem))
            )
    return ops


@dataclass(frozen=True, slots=True)
class Case:
    nodes: list[NodeSpec]
    tie_rank: list[int] | None
    typical: TypicalPods
    ops: list[Op]
    seed: int


@st.composite
def st_case(draw: st.DrawFn) -> Case:
    n = draw(st.integers(1, 6))
    nodes = [draw(st_node(f"n{i}")) for i in range(n)]
    tie_rank = draw(st.none() | st.permutations(list(range(n))))
    shapes = draw(st.lists(_shape, max_size=8))  # none: an empty typical workload
    coverage = draw(st.sampled_from([0.5, 0.95, 1.0]))
    return Case(
        nodes=nodes,
        tie_rank=tie_rank,
        typical=TypicalPods.from_shapes(shapes, coverage=coverage),
        ops=draw(st_ops()),
        seed=draw(st.integers(0, 2**32 - 1)),
    )
