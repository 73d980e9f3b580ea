"""What the pending explanations take from the capacity index, computed once per index state
and per request class, so that explaining a pod costs a few lookups and one pass over the
nodes that can be among its nearest misses.

A pod's explanation depends on the index and on its request, GPU models and tolerations. All
of it but the CPU and memory checks depends on the request's *class*: the request without its
CPU and memory. A cluster's pending pods fall in few classes (the bench's 2,000 pending pods of
the 10,000-node cluster in 4: 1, 2, 4 and 8 whole cards), so the per-node masks of a class are
built once per index state (``CapacityIndex.version``), and the CPU and memory checks of each
pod are binary searches over the active nodes' free CPU and memory, sorted once per state.

At 10,000 nodes an explanation was 5 ms of numpy over every node (10.6 s for 2,000 pods); the
answers are the same, bit for bit: the masks are the ones ``masks.masks`` builds, and the
near-miss scores are computed with the same expression on the same values.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass
from weakref import WeakKeyDictionary

import numpy as np

from models import ResourceRequest, Toleration
from models.analysis import BlockReason, Explanation
from streams.fragmentation import masks as mk
from streams.fragmentation.capacity import BoolArray, CapacityIndex, FloatArray, IntArray

FIXED_REASONS = (
    BlockReason.UNSCHEDULABLE,
    BlockReason.TAINT,
    BlockReason.GPU_MODEL,
    BlockReason.GPU_COUNT,
    BlockReason.GPU_SHARE,
    BlockReason.GPU_MEMORY,
    BlockReason.MIG_PROFILE,
)
"""The reasons that do not depend on the request's CPU and memory."""
ORDER = (
    BlockReason.UNSCHEDULABLE,
    BlockReason.TAINT,
    BlockReason.CPU,
    BlockReason.MEMORY,
    BlockReason.GPU_MODEL,
    BlockReason.GPU_COUNT,
    BlockReason.GPU_SHARE,
    BlockReason.GPU_MEMORY,
    BlockReason.MIG_PROFILE,
)
"""The order ``masks.masks`` lists the reasons in (a near miss names its reasons so)."""
HARD = (BlockReason.UNSCHEDULABLE, BlockReason.TAINT, BlockReason.GPU_MODEL)

ClassKey = tuple[object, ...]
ExplainKey = tuple[object, ...]


def class_key(
    req: ResourceRequest, gpu_models: tuple[str, ...], tolerations: tuple[Toleration, ...]
) -> ClassKey:
    return (
        req.gpu_count,
        req.gpu_milli,
        tuple(sorted(req.mig.items())),
        req.gpu_memory_mib,
        req.gpu_memory_pct,
        req.gpu_cores_pct,
        req.gpu_shared_resource,
        req.gpu_dra,
        gpu_models,
        tolerations,
    )


@dataclass(frozen=True, slots=True)
class Nodes:
    """The active nodes' free CPU and memory, sorted, and each row's rank by node name: what
    every class shares at one index state."""

    checked: int
    cpu_sorted: list[int]
    mem_sorted: list[int]
    cpu_total: int
    mem_total: int
    name_rank: IntArray
    """Each row's place among the active nodes by name (inactive rows: past the end); ties
    between equal near-miss scores go by name."""

    @classmethod
    def of(cls, index: CapacityIndex) -> Nodes:
        active = index.active
        cpu = index.cpu_free[active]
        mem = index.mem_free[active]
        return cls(
            checked=int(active.sum()),
            cpu_sorted=np.sort(cpu).tolist(),
            mem_sorted=np.sort(mem).tolist(),
            cpu_total=int(cpu.sum()),
            mem_total=int(mem.sum()),
            name_rank=_name_rank(index),
        )


@dataclass(frozen=True, slots=True)
class Tier:
    """Nodes whose near-miss score has the same part that does not depend on CPU and memory
    (``base``): no node of the tier scores below it."""

    base: float
    rows: IntArray
    open: bool
    """The nodes no fixed reason blocks: near misses only where CPU or memory is short."""


@dataclass(frozen=True, slots=True)
class RequestClass:
    """One class's masks at one index state."""

    reasons: dict[BlockReason, BoolArray]
    """The fixed reasons' masks (active nodes only)."""
    counts: dict[BlockReason, int]
    missing: IntArray
    hard: FloatArray
    """The near-miss score's count of hard reasons per node (as ``pending`` adds them)."""
    per_gpu: FloatArray
    """The score's missing devices term, ``missing / max(1, devices)``."""
    memory_half: FloatArray
    """The score's half card for a card short only of memory."""
    tiers: tuple[Tier, ...]
    """Every active node once, by ``base`` ascending: a near-miss search stops at the first
    tier above the k-th score found."""
    gpu_fits_total: bool
    """The free GPU, summed over nodes, covers the class's devices and MIG instances."""
    open_cpu: list[int]
    """Free CPU of the active nodes no fixed reason blocks, ascending."""
    open_mem_best: list[int]
    """The most free memory among ``open_cpu[j:]``: a node with both enough CPU and memory."""

    @classmethod
    def of(
        cls,
        index: CapacityIndex,
        req: ResourceRequest,
        gpu_models: tuple[str, ...],
        tolerations: tuple[Toleration, ...],
    ) -> RequestClass:
        free = mk.Free.of(index)
        m = mk.masks(index, req, gpu_models, tolerations, free)
        reasons = {r: m.reasons[r] for r in FIXED_REASONS}
        block = np.zeros(len(index.active), dtype=bool)
        for mask in reasons.values():
            block |= mask
        hard = np.zeros(len(index.active))
        for r in HARD:
            hard += reasons[r]
        # the terms as ``_near_misses`` adds them, element by element the same values
        per_gpu = m.missing / max(1, req.gpu_count + sum(req.mig.values()))
        memory_half = 0.5 * reasons[BlockReason.GPU_MEMORY] / max(1, req.gpu_count)
        open_rows = np.flatnonzero(index.active & ~block)
        order = np.argsort(index.cpu_free[open_rows], kind="stable")
        cpu = index.cpu_free[open_rows][order]
        best = np.maximum.accumulate(index.mem_free[open_rows][order][::-1])[::-1]
        return cls(
            reasons=reasons,
            counts={r: int(mask.sum()) for r, mask in reasons.items()},
            missing=m.missing,
            hard=hard,
            per_gpu=per_gpu,
            memory_half=memory_half,
            tiers=_tiers(index.active & block, hard + per_gpu - memory_half, open_rows),
            gpu_fits_total=mk.fits_total(index, free, [req]),
            open_cpu=cpu.tolist(),
            open_mem_best=best.tolist(),
        )

    def fits_some_node(self, cpu_milli: int, memory_mib: int) -> bool:
        """An active node no fixed reason blocks, with the CPU and the memory."""
        j = bisect_left(self.open_cpu, cpu_milli)
        return j < len(self.open_cpu) and self.open_mem_best[j] >= memory_mib


def _tiers(blocked: BoolArray, base: FloatArray, open_rows: IntArray) -> tuple[Tier, ...]:
    rows = np.flatnonzero(blocked)
    values, which = np.unique(base[rows], return_inverse=True)
    tiers = [Tier(float(v), rows[which == j], False) for j, v in enumerate(values.tolist())]
    if len(open_rows):
        tiers.append(Tier(0.0, open_rows, True))
    return tuple(sorted(tiers, key=lambda t: (t.base, not t.open)))


SLACK = 1e-9
"""A tier is skipped only when its base is above the k-th score by more than float rounding
(the base is summed in another order than the score)."""


def nearest(
    index: CapacityIndex,
    req: ResourceRequest,
    cls: RequestClass,
    rank: IntArray,
    k: int,
) -> tuple[IntArray, FloatArray]:
    """The rows of the ``k`` blocked nodes with the lowest near-miss scores (ties by name),
    in order, and their scores: the tiers in order until the next one cannot do better."""
    cpu, mem = req.cpu_milli, req.memory_mib
    found_rows: list[IntArray] = []
    found_scores: list[FloatArray] = []
    kth = np.inf
    held = 0
    for tier in cls.tiers:
        if held >= k and tier.base - SLACK > kth:
            break
        rows = tier.rows
        if tier.open:
            rows = rows[(index.cpu_free[rows] < cpu) | (index.mem_free[rows] < mem)]
            if not len(rows):
                continue
        score = (
            cls.hard[rows]
            + np.maximum(0, cpu - index.cpu_free[rows]) / max(1, cpu)
            + np.maximum(0, mem - index.mem_free[rows]) / max(1, mem)
            + cls.per_gpu[rows]
            - cls.memory_half[rows]
        )
        found_rows.append(rows)
        found_scores.append(score)
        held += len(rows)
        if held >= k:
            every = np.concatenate(found_scores) if len(found_scores) > 1 else score
            kth = float(np.partition(every, k - 1)[k - 1])
    if not held:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    rows = np.concatenate(found_rows)
    scores = np.concatenate(found_scores)
    if held > k:  # only those at or below the k-th score can be among the k
        keep = scores <= kth
        rows, scores = rows[keep], scores[keep]
    order = np.lexsort((rank[rows], scores))[:k]
    return rows[order], scores[order]


class ExplainCache:
    """The classes and explanations of one index state; ``CapacityIndex.explained`` hands out
    a fresh one when the index changed."""

    def __init__(self, index: CapacityIndex) -> None:
        self.version = index.version
        self._index = index
        self._nodes: Nodes | None = None
        self.classes: dict[ClassKey, RequestClass] = {}
        self.explanations: dict[ExplainKey, Explanation] = {}

    @property
    def nodes(self) -> Nodes:
        if self._nodes is None:
            self._nodes = Nodes.of(self._index)
        return self._nodes

    def request_class(
        self,
        req: ResourceRequest,
        gpu_models: tuple[str, ...],
        tolerations: tuple[Toleration, ...],
    ) -> RequestClass:
        key = class_key(req, gpu_models, tolerations)
        found = self.classes.get(key)
        if found is None:
            found = self.classes[key] = RequestClass.of(self._index, req, gpu_models, tolerations)
        return found


def below(sorted_values: list[int], bound: int) -> int:
    """How many of the values are below ``bound``."""
    return bisect_left(sorted_values, bound)


_CACHES: WeakKeyDictionary[CapacityIndex, ExplainCache] = WeakKeyDictionary()
_RANKS: WeakKeyDictionary[CapacityIndex, tuple[int, IntArray]] = WeakKeyDictionary()


def _name_rank(index: CapacityIndex) -> IntArray:
    """Each row's place by node name, kept until a node comes or goes (sorting the names
    of 10,000 nodes on every capacity change would cost more than the explanations)."""
    kept = _RANKS.get(index)
    if kept is not None and kept[0] == index.names_version and len(kept[1]) == len(index.active):
        return kept[1]
    active = index.active
    rows = np.flatnonzero(active)
    names = [index.names[i] or "" for i in rows.tolist()]
    rank = np.full(len(active), len(active), dtype=np.int64)
    rank[rows[sorted(range(len(names)), key=names.__getitem__)]] = np.arange(len(rows))
    _RANKS[index] = (index.names_version, rank)
    return rank


def cache_of(index: CapacityIndex) -> ExplainCache:
    """The index's cache at its present state (a new one once a node changed)."""
    cache = _CACHES.get(index)
    if cache is None or cache.version != index.version:
        cache = _CACHES[index] = ExplainCache(index)
    return cache
