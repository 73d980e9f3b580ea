"""A copy of the cluster's free capacity to try an action on before proposing it.

Planners search on one node at a time (``NodeRoom``: a few Python numbers, so trying hundreds
of victim sets costs microseconds each) and prove the plan they pick on the whole cluster
(``Scratch``: the capacity index's arrays, copied), with the same placement rules the pending
explanations use. Victims and movers are pods on whole, milli-GPU or time-sliced cards; a pod
on MIG or HAMi cards is never a candidate (its release is not modelled), which keeps a plan
from ever promising room those modes would not give.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from models import PodPhase, ResourceRequest, TaskProfile
from models.cards import SharingMode
from streams.cluster.view import ClusterView
from streams.fragmentation.capacity import CapacityIndex
from streams.fragmentation.measure import (
    RULE_FIXED,
    RULE_MILLI,
    RULE_SLICED,
    NodeState,
    node_state,
)
from streams.fragmentation.pending import Free, placeable_nodes, take
from streams.fragmentation.shapes import MILLI_PER_GPU

__all__ = [
    "NodeRoom",
    "ReadOnlyScratch",
    "Scratch",
    "cards_of",
    "could_host",
    "simple_request",
]

SIMPLE_RULES = frozenset({RULE_MILLI, RULE_FIXED, RULE_SLICED})
HOLDING = frozenset({PodPhase.PENDING, PodPhase.RUNNING})


def simple_request(req: ResourceRequest) -> bool:
    """A request a node search can weigh: GPUs by count and share, no MIG or HAMi."""
    return not req.mig and not req.is_hami


def could_host(
    index: CapacityIndex, task: TaskProfile, blocked: np.ndarray, *, nearest: int
) -> list[int]:
    """Slots of the ``nearest`` nodes to fitting ``task`` among those big enough for it were
    they empty and not ruled out: the only nodes a search visits. Nearness is the share of the
    request each node lacks (GPU on its best cards, CPU, memory), so the nodes where the
    fewest evictions could do are searched first, and the cost of a plan stays bounded on a
    cluster of thousands of nodes."""
    r = task.requests
    ok = (
        ~blocked
        & (index.gpu_cards >= r.gpu_count)
        & (index.cpu_alloc >= r.cpu_milli)
        & (index.mem_alloc >= r.memory_mib)
    )
    where = np.flatnonzero(ok)
    if len(where) <= nearest:
        return [int(i) for i in where]
    lack = np.maximum(0, r.cpu_milli - index.cpu_free[where]) / max(1, r.cpu_milli)
    lack += np.maximum(0, r.memory_mib - index.mem_free[where]) / max(1, r.memory_mib)
    if r.gpu_count > 0:
        share = np.where(index.rule[where] == RULE_MILLI, r.gpu_milli, index.fixed[where])
        best = -np.sort(-index.gpu_free[where], axis=1)[:, : r.gpu_count]
        short = np.maximum(0, share[:, None] - best).sum(axis=1)
        lack += short / max(1, r.gpu_count * MILLI_PER_GPU)
    order = np.lexsort((where, lack))[:nearest]
    return [int(where[i]) for i in order]


def cards_of(view: ClusterView, task: TaskProfile) -> tuple[int, ...] | None:
    """The cards a bound pod holds: as its node's profile lists them, else as the pod says;
    None when it holds GPUs on cards nobody named (nothing to give back then)."""
    if task.node is None:
        return None
    node = view.nodes.get(task.node)
    listed = () if node is None else tuple(g.index for g in node.gpus if task.key in g.pods)
    cards = listed or task.gpu_indices
    if task.requests.gpu_count > 0 and len(cards) < task.requests.gpu_count:
        return None
    return cards


@dataclass(slots=True)
class NodeRoom:
    """One node's free resources as plain numbers, for searching victim sets on it."""

    slot: int
    rule: int
    fixed: int
    cpu: int
    mem: int
    gpu: list[int]
    replicas: list[int]
    broken: frozenset[int] = field(default_factory=frozenset)
    """Cards out of service: what a pod leaves there is not free for anyone."""

    @classmethod
    def of(cls, scratch: Scratch, slot: int) -> NodeRoom | None:
        index = scratch.index
        rule = int(index.rule[slot])
        if rule not in SIMPLE_RULES or slot in index.mig_free:
            return None
        width = int(index.gpu_count[slot])
        name = index.names[slot]
        profile = scratch.view.nodes.get(name or "")
        broken = frozenset(
            g.index for g in (profile.gpus if profile else ()) if not g.healthy
        ) | frozenset(
            g.index for g in (profile.gpus if profile else ()) if g.mode is SharingMode.MIG
        )
        free = scratch.free
        return cls(
            slot=slot,
            rule=rule,
            fixed=int(index.fixed[slot]),
            cpu=int(free.cpu[slot]),
            mem=int(free.mem[slot]),
            gpu=[int(v) for v in free.gpu[slot, :width]],
            replicas=[int(v) for v in free.replicas[slot, :width]],
            broken=broken,
        )

    def without(self, tasks: list[tuple[TaskProfile, tuple[int, ...]]]) -> NodeRoom:
        """The node with these pods gone (each with the cards it holds)."""
        out = NodeRoom(
            self.slot,
            self.rule,
            self.fixed,
            self.cpu,
            self.mem,
            list(self.gpu),
            list(self.replicas),
            self.broken,
        )
        for task, cards in tasks:
            r = task.requests
            out.cpu += r.cpu_milli
            out.mem += r.memory_mib
            for c in cards:
                if c in self.broken or c >= len(out.gpu):
                    continue
                if self.rule == RULE_SLICED:
                    out.replicas[c] += 1
                    out.gpu[c] = min(MILLI_PER_GPU, out.gpu[c] + self.fixed)
                elif self.rule == RULE_FIXED:
                    out.gpu[c] = MILLI_PER_GPU
                else:
                    out.gpu[c] = min(MILLI_PER_GPU, out.gpu[c] + r.gpu_milli)
        return out

    def placed(self, req: ResourceRequest) -> NodeRoom:
        """The node once ``req`` took its share, each device on the tightest card that has
        room (a time-sliced device: a replica of the card with the fewest left)."""
        out = self.without([])
        out.cpu -= req.cpu_milli
        out.mem -= req.memory_mib
        for _ in range(req.gpu_count):
            if self.rule == RULE_SLICED:
                left = [c for c, n in enumerate(out.replicas) if n > 0]
                if not left:
                    break
                card = min(left, key=lambda c: out.replicas[c])
                out.replicas[card] -= 1
                out.gpu[card] = max(0, out.gpu[card] - self.fixed)
                continue
            share = self.fixed if self.rule == RULE_FIXED else req.gpu_milli
            fitting = [c for c, g in enumerate(out.gpu) if g >= share]
            if not fitting:
                break
            card = min(fitting, key=lambda c: out.gpu[c])
            out.gpu[card] -= share
        return out

    def fits(self, req: ResourceRequest) -> bool:
        if self.cpu < req.cpu_milli or self.mem < req.memory_mib:
            return False
        if req.gpu_count == 0:
            return True
        if self.rule == RULE_SLICED:
            return sum(self.replicas) >= req.gpu_count
        share = self.fixed if self.rule == RULE_FIXED else req.gpu_milli
        return sum(1 for g in self.gpu if g >= share) >= req.gpu_count

    def write(self, free: Free) -> None:
        """Put this node's numbers into a whole-cluster copy."""
        i = self.slot
        free.cpu[i] = self.cpu
        free.mem[i] = self.mem
        free.gpu[i, : len(self.gpu)] = self.gpu
        free.replicas[i, : len(self.replicas)] = self.replicas


class Scratch:
    """The whole cluster's free capacity, copied: what a plan is proven on."""

    def __init__(self, view: ClusterView, free: Free | None = None) -> None:
        self.view = view
        self.index: CapacityIndex = view.index
        self.free = free if free is not None else Free.of(view.index).copy()

    def copy(self) -> Scratch:
        return Scratch(self.view, self.free.copy())

    def room(self, slot: int) -> NodeRoom | None:
        return NodeRoom.of(self, slot)

    def placeable(self, task: TaskProfile) -> np.ndarray:
        return placeable_nodes(self.index, self.free, task)

    def best_fit(self, task: TaskProfile, *, exclude: frozenset[int] = frozenset()) -> int | None:
        """The fitting node with the least free GPU left (then CPU), as a packing scheduler
        picks; None: it fits nowhere."""
        ok = self.placeable(task)
        for i in exclude:
            ok[i] = False
        where = np.flatnonzero(ok)
        if len(where) == 0:
            return None
        key = self.free.gpu[where].sum(axis=1) * 1_000_000 + self.free.cpu[where] // 1000
        return int(where[int(np.argmin(key))])

    def place(self, task: TaskProfile, slot: int) -> None:
        take(self.index, self.free, slot, task.requests)

    def frag_milli(self, room: NodeRoom) -> float:
        """The FGD fragment of a node with these numbers, by the cluster's typical pods."""
        return self.index.measure.frag_milli(_state(self.index, room))


class ReadOnlyScratch(Scratch):
    """A scratch nobody places on, whose nodes' rooms are built once: a planner that only
    reads its scratch (and copies it to prove a plan) keeps one while the capacity index is
    unchanged, and its first search and the held-back one that follows at the same instant
    read the same rooms."""

    def __init__(self, view: ClusterView) -> None:
        super().__init__(view)
        self.version = view.index.version
        self._rooms: dict[int, NodeRoom | None] = {}

    def current(self, view: ClusterView) -> bool:
        """Whether it still shows ``view``: the same view, index and index version."""
        return self.view is view and self.index is view.index and self.version == view.index.version

    def room(self, slot: int) -> NodeRoom | None:
        if slot not in self._rooms:
            self._rooms[slot] = NodeRoom.of(self, slot)
        return self._rooms[slot]

    def place(self, task: TaskProfile, slot: int) -> None:
        raise TypeError("a read-only scratch is not placed on: place on a copy")


def _state(index: CapacityIndex, room: NodeRoom) -> NodeState:
    model = index.models[room.slot]
    if room.rule == RULE_MILLI:
        return node_state(model, room.cpu, room.gpu)
    units = room.replicas if room.rule == RULE_SLICED else [-1] * len(room.gpu)
    cards = tuple(sorted(zip(room.gpu, units, [-1] * len(room.gpu), strict=True), reverse=True))
    return ("shared", model, room.cpu, room.rule, room.fixed, 0, cards, ())
