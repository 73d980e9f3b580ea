"""Prioritize: each policy's node scores on the live view, and their mapping to the extender's
0..10 range.

kube-scheduler adds an extender's score x weight x 10 to its plugins' sum (each plugin gives
0..100), so the mapping keeps what the policy ranks first, and only it, at the top: the best
nodes get 10, the others 0..9 by where they fall between the worst and the best. At weight 100
(deploy/README.md) one step of it, 1,000, outweighs what the default plugins' scores differ by
between nodes (least allocated and balanced allocation, about 200); among equally best nodes
those plugins break the tie, which ``_fuller_first`` leaves to few.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np

from models import TaskProfile
from streams.cluster.view import shape_of
from streams.extender.room import RequestKey, Room, request_key
from streams.fragmentation.measure import NodeState
from streams.placement.cluster_arrays import FloatArray, IntArray, gpu_tag
from streams.placement.policies import POLICIES, SCORED_BY_ARRAYS
from streams.placement.spec import PodSpec

MAX_EXTENDER_SCORE = 10
"""kube-scheduler's ``extenderv1.MaxExtenderPriority``."""

MEMO_MAX = 500_000
"""(state, request) growths kept: a few hundred bytes each; a cluster shows a few thousand
states and a queue a few hundred request shapes."""

__all__ = ["MAX_EXTENDER_SCORE", "NodeScorer", "extender_range", "make_scorer"]


class NodeScorer(Protocol):
    """One extension point: raw scores of the candidate rows, higher is better."""

    name: str

    def raw(self, room: Room, task: TaskProfile, rows: IntArray) -> FloatArray: ...


def extender_range(raw: Sequence[float] | FloatArray) -> list[int]:
    """Raw scores -> 0..10: the best 10, the rest 0..9 linearly from the worst; a node the
    policy cannot place on at all (an infinite score) 0."""
    values = np.asarray(raw, dtype=np.float64)
    finite = np.isfinite(values)
    if not finite.any():
        return [0] * len(values)
    hi, lo = float(values[finite].max()), float(values[finite].min())
    top = values == hi
    if hi == lo:
        return np.where(top, MAX_EXTENDER_SCORE, 0).tolist()  # type: ignore[no-any-return]
    step = (MAX_EXTENDER_SCORE - 1) / (hi - lo)
    with np.errstate(invalid="ignore"):
        lower = np.where(finite, np.floor((values - lo) * step), 0)
    return np.where(top, MAX_EXTENDER_SCORE, lower).astype(np.int64).tolist()  # type: ignore[no-any-return]


class FgdScorer:
    """The growth of the node's FGD fragment if the pod lands there, negated: the least
    growth (or the largest drop) is best.

    A node's growth depends only on its state and the request, and a cluster shows few
    states, so it is kept per (state, request); and per request for each row until the row
    changes (``CapacityIndex.row_version``), so a call on 10,000 nodes looks up only the
    rows that changed since the last pod of that shape. Both go when the typical pods do."""

    name = "fgd"

    def __init__(self) -> None:
        self._memo: dict[tuple[NodeState, RequestKey], float] = {}
        self._rows: dict[RequestKey, tuple[FloatArray, IntArray]] = {}
        self._measure: object = None

    def raw(self, room: Room, task: TaskProfile, rows: IntArray) -> FloatArray:
        index = room.index
        if index.measure is not self._measure or len(self._memo) > MEMO_MAX:
            self._memo.clear()
            self._rows.clear()
            self._measure = index.measure
        key = request_key(task.requests)
        n = len(index.names)
        cached = self._rows.get(key)
        if cached is None or len(cached[0]) < n:
            cached = self._rows[key] = (np.full(n, np.nan), np.full(n, -2, dtype=np.int64))
        growth, stamp = cached
        stale = rows[stamp[rows] != index.row_version[rows]]
        for row in stale.tolist():
            growth[row] = self._growth(room, row, task, key, index.states[row], own=True)
            stamp[row] = index.row_version[row]
        out = -growth[rows]
        for k in np.flatnonzero(np.isin(rows, list(room.changed))).tolist() if room.changed else ():
            row = int(rows[k])  # an assumed pod is on it: its own figures, not the index's
            out[k] = -self._growth(room, row, task, key, room.state(row), own=False)
        return _fuller_first(out, room, rows)

    def _growth(
        self,
        room: Room,
        row: int,
        task: TaskProfile,
        key: RequestKey,
        state: NodeState,
        *,
        own: bool,
    ) -> float:
        found = self._memo.get((state, key))
        if found is None:
            landings = room.landings(row, task.requests, own=own)
            if not landings:
                found = float("inf")  # filtered out already; scored last if asked
            else:
                before = room.index.measure.frag_milli(state)
                found = min(landing.frag_after_milli for landing in landings) - before
            self._memo[(state, key)] = found
        return found


def _fuller_first(raw: FloatArray, room: Room, rows: IntArray) -> FloatArray:
    """Among the nodes with the best score, the one with the least free GPU stays best and
    the others drop just below it. Many nodes tie on FGD's growth (every empty node takes a
    pod with no growth); the paper's simulator breaks ties by a fixed node order, which
    packs, while kube-scheduler's own plugins would break them by least allocated, which
    spreads."""
    finite = np.isfinite(raw)
    if finite.sum() < 2:
        return raw
    hi = raw[finite].max()
    best = raw == hi
    if best.sum() < 2:
        return raw
    others = raw[finite & ~best]
    below = hi - ((hi - others.max()) / 2 if len(others) else 1.0)
    free = room.free.gpu[rows].sum(axis=1)
    out = raw.copy()
    out[best & (free != free[best].min())] = below
    return out


class RandomScorer:
    name = "random"

    def __init__(self, seed: int) -> None:
        self._rng = np.random.default_rng(seed)

    def raw(self, room: Room, task: TaskProfile, rows: IntArray) -> FloatArray:
        return self._rng.integers(0, MAX_EXTENDER_SCORE + 1, len(rows)).astype(np.float64)


class LiveArrays:
    """The live free capacity in the shape the simulator's score-only policies read."""

    def __init__(self, room: Room) -> None:
        index = room.index
        self.cpu_free: IntArray = room.free.cpu
        self.gpu_free: IntArray = room.free.gpu
        self.gpu_count: IntArray = index.gpu_count
        self.tie_rank: IntArray = np.arange(len(index.names), dtype=np.int64)
        self._view = room.view
        self._tags: IntArray | None = None

    def gpus_of(self, i: int) -> IntArray:
        return self.gpu_free[i, : int(self.gpu_count[i])]

    @property
    def tag_pods(self) -> IntArray:
        """Bound pods per node by GPU kind (gpu-clustering's score), counted from the view's
        tasks once per view state: only that policy reads it."""
        if self._tags is None:
            index = self._view.index
            width = self.gpu_free.shape[1]
            tags = np.zeros((len(index.names), width + 1), dtype=np.int64)
            for task in self._view.tasks.values():
                row = index.slot.get(task.node) if task.node else None
                tag = gpu_tag(shape_of(task)) if row is not None else None
                if row is not None and tag is not None:
                    tags[row, min(tag, width)] += 1
            self._tags = tags
        return self._tags


class ArrayScorer:
    """A simulator policy that scores from free-capacity arrays, on the live view."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._arrays: tuple[tuple[object, ...], LiveArrays] | None = None

    def raw(self, room: Room, task: TaskProfile, rows: IntArray) -> FloatArray:
        if self._arrays is None or self._arrays[0] != room.key:
            self._arrays = (room.key, LiveArrays(room))
        policy = SCORED_BY_ARRAYS[self.name](self._arrays[1])
        pod = PodSpec(name=task.key, shape=shape_of(task), memory_mib=task.requests.memory_mib)
        return policy.scores(pod, rows).astype(np.float64)


def make_scorer(name: str, *, seed: int) -> NodeScorer:
    builders: dict[str, Callable[[], NodeScorer]] = {
        FgdScorer.name: FgdScorer,
        RandomScorer.name: lambda: RandomScorer(seed),
        **{n: (lambda n=n: ArrayScorer(n)) for n in SCORED_BY_ARRAYS},  # type: ignore[misc]
    }
    if name not in builders:
        known = ", ".join(POLICIES)
        raise ValueError(f"unknown placement policy {name!r}; known: {known}")
    return builders[name]()
