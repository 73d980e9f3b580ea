"""The FGD paper's evaluation protocol, for comparing placement policies on a workload.

Pods are shuffled with a seed and padded with random clones to ``ratio`` times the cluster's GPU
capacity; they arrive one by one and never leave; a pod that fits nowhere is dropped. After every
arrival the allocation and fragmentation are recorded against the GPU demand arrived so far, and
each arrived-demand level (0..130 %) reports the mean of the records that round to it.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from streams.fragmentation.measure import FragMeasure
from streams.fragmentation.shapes import TypicalPods
from streams.placement.cluster_arrays import SimCluster
from streams.placement.policies import make_policy
from streams.placement.sim_scheduler import Placement, SimScheduler
from streams.placement.spec import NodeSpec, PodSpec

FloatArray = npt.NDArray[np.float64]
DEFAULT_RATIO = 1.3
LEVELS = tuple(range(131))


class ProtocolError(ValueError):
    """The FGD protocol cannot run on this input (it pads and measures by GPU demand)."""


def check_protocol_inputs(pods: Sequence[PodSpec], *, capacity_milli: int, ratio: float) -> None:
    if not math.isfinite(ratio) or ratio <= 0:
        raise ProtocolError(f"ratio must be a finite number above 0, got {ratio}")
    if capacity_milli <= 0:
        raise ProtocolError("the node list has no GPUs; the protocol measures GPU allocation")
    if not pods:
        raise ProtocolError("the pod list is empty")
    if not any(p.total_gpu_milli for p in pods):
        raise ProtocolError(
            "no pod in the pod list requests a GPU; the protocol pads the workload by GPU demand"
        )


def arrival_sequence(
    pods: Sequence[PodSpec], *, capacity_milli: int, ratio: float, rng: np.random.Generator
) -> list[PodSpec]:
    """Shuffle the pods, then pad with random clones (or drop random pods) to ratio x capacity.

    Padding stops at the first drawn clone whose per-GPU share would overshoot the target, as in
    the reference simulator; that detail shifts the total by at most one pod.
    """
    check_protocol_inputs(pods, capacity_milli=capacity_milli, ratio=ratio)
    base = sorted(pods, key=lambda p: p.name)
    order = rng.permutation(len(base))
    seq = [base[int(i)] for i in order]
    target = ratio * capacity_milli
    total = sum(p.total_gpu_milli for p in seq)
    if total < target:
        k = 0
        while True:
            src = base[int(rng.integers(len(base)))]
            if total + src.shape.gpu_milli > target:
                break
            seq.append(PodSpec(f"{src.name}-clone-{k}", src.shape, src.memory_mib))
            total += src.total_gpu_milli
            k += 1
    else:
        while total > target and seq:
            victim = seq.pop(int(rng.integers(len(seq))))
            total -= victim.total_gpu_milli
    return seq


@dataclass(frozen=True, slots=True)
class SeedRun:
    """One value per arrival, in percent of the cluster's GPU capacity (ratio: of idle GPU)."""

    arrived_pct: FloatArray
    alloc_pct: FloatArray
    frag_amount_pct: FloatArray
    frag_ratio_pct: FloatArray
    placed: int
    dropped: int


def run_seed(
    nodes: Sequence[NodeSpec],
    pods: Sequence[PodSpec],
    *,
    policy: str,
    seed: int,
    typical: TypicalPods,
    ratio: float = DEFAULT_RATIO,
) -> SeedRun:
    rng = np.random.default_rng(seed)
    tie_rank = rng.permutation(len(nodes)).astype(np.int64)
    cluster = SimCluster(nodes, measure=FragMeasure(typical), tie_rank=tie_rank)
    seq = arrival_sequence(pods, capacity_milli=cluster.capacity_milli, ratio=ratio, rng=rng)
    scheduler = SimScheduler(cluster, make_policy(policy, cluster), rng)
    n = len(seq)
    arrived = np.empty(n)
    alloc = np.empty(n)
    frag = np.empty(n)
    idle = np.empty(n)
    arrived_milli = 0
    placed = 0
    for k, pod in enumerate(seq):
        arrived_milli += pod.total_gpu_milli
        if isinstance(scheduler.schedule(pod), Placement):
            placed += 1
        arrived[k] = arrived_milli
        alloc[k] = cluster.allocated_milli
        frag[k] = cluster.frag_milli
        idle[k] = cluster.idle_milli
    cap = float(cluster.capacity_milli)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio_pct = np.where(idle > 0, frag / idle * 100.0, 0.0)
    return SeedRun(
        arrived_pct=arrived / cap * 100.0,
        alloc_pct=alloc / cap * 100.0,
        frag_amount_pct=frag / cap * 100.0,
        frag_ratio_pct=ratio_pct,
        placed=placed,
        dropped=n - placed,
    )


def level_means(
    arrived_pct: FloatArray, values: FloatArray, levels: Iterable[int] = LEVELS
) -> FloatArray:
    """Mean of the values whose arrived % rounds (half to even) to each level; +-1 if none do."""
    rounded = np.round(arrived_pct).astype(np.int64)
    out = []
    for level in levels:
        hit = rounded == level
        if not hit.any():
            hit = np.abs(rounded - level) <= 1
        out.append(float(values[hit].mean()) if hit.any() else float("nan"))
    return np.array(out)


@dataclass(frozen=True, slots=True)
class Curve:
    """Per-level values (one seed, or the mean over seeds), the shape of the published tables."""

    levels: tuple[int, ...]
    alloc_pct: tuple[float, ...]
    frag_amount_pct: tuple[float, ...]
    frag_ratio_pct: tuple[float, ...]
    pods_arrived: float  # per seed (mean over seeds)
    pods_placed: float

    @classmethod
    def of_record(cls, rec: SeedRun, levels: Sequence[int] = LEVELS) -> Curve:
        def per_level(values: FloatArray) -> tuple[float, ...]:
            return tuple(float(v) for v in level_means(rec.arrived_pct, values, levels))

        return cls(
            levels=tuple(levels),
            alloc_pct=per_level(rec.alloc_pct),
            frag_amount_pct=per_level(rec.frag_amount_pct),
            frag_ratio_pct=per_level(rec.frag_ratio_pct),
            pods_arrived=float(rec.placed + rec.dropped),
            pods_placed=float(rec.placed),
        )

    @classmethod
    def mean(cls, curves: Sequence[Curve]) -> Curve:
        if not curves:
            raise ValueError("no curves to average")
        levels = curves[0].levels
        if any(c.levels != levels for c in curves):
            raise ValueError("curves cover different levels")

        def avg(values: list[tuple[float, ...]]) -> tuple[float, ...]:
            # a level no seed reached stays NaN (JSON null); numpy's warning about it is noise
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                return tuple(float(v) for v in np.nanmean(np.array(values), axis=0))

        return cls(
            levels=levels,
            alloc_pct=avg([c.alloc_pct for c in curves]),
            frag_amount_pct=avg([c.frag_amount_pct for c in curves]),
            frag_ratio_pct=avg([c.frag_ratio_pct for c in curves]),
            pods_arrived=sum(c.pods_arrived for c in curves) / len(curves),
            pods_placed=sum(c.pods_placed for c in curves) / len(curves),
        )


def run_experiment(
    nodes: Sequence[NodeSpec],
    pods: Sequence[PodSpec],
    *,
    policy: str,
    seeds: Sequence[int],
    typical: TypicalPods,
    ratio: float = DEFAULT_RATIO,
    levels: Sequence[int] = LEVELS,
) -> Curve:
    """Mean over seeds of each seed's per-level means."""
    if not seeds:
        raise ValueError("at least one seed is needed")
    return Curve.mean(
        [
            Curve.of_record(
                run_seed(nodes, pods, policy=policy, seed=s, typical=typical, ratio=ratio), levels
            )
            for s in seeds
        ]
    )
