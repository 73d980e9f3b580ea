"""The cluster's free capacity as arrays, fed by node-profile changes (a low-rate stream).

Slots are reused when nodes leave, so the arrays stay as large as the cluster. Each node's FGD
fragment is updated on its own change (a memo lookup); the cluster totals are running sums.
Unhealthy cards count as neither idle nor usable: nothing new should land on them.
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import attrgetter
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from models import GpuState, NodeProfile, Taint, Toleration
from models.cards import SharingMode, mig_profile_slices, resource_name
from streams.fragmentation.measure import (
    RULE_FIXED,
    RULE_HAMI,
    RULE_MIG_SINGLE,
    RULE_MILLI,
    RULE_SLICED,
    FragMeasure,
    NodeState,
    node_state,
)
from streams.fragmentation.shapes import MILLI_PER_GPU

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
FloatArray = npt.NDArray[np.float64]
BLOCKING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
G = TypeVar("G", bound=np.generic)
Group = tuple[str, str]


FRAG_QUANTA_PER_MILLI = 1_000_000_000
"""A node's fragment is summed in billionths of a milli-GPU: exact integers add in any order,
and a Python int holds any cluster's total (8,000 milli a node times 10**9 is no limit)."""


def _quanta(frag_milli: float) -> int:
    return round(frag_milli * FRAG_QUANTA_PER_MILLI)


@dataclass(slots=True)
class GroupTotals:
    """One pool and model's cards, idle milli-GPU and unhealthy cards."""

    cards: int = 0
    idle_milli: int = 0
    unhealthy: int = 0


def _extend(a: npt.NDArray[G], n: int, fill: object) -> npt.NDArray[G]:
    out = np.full(n, fill, dtype=a.dtype)
    out[: len(a)] = a
    return out


def untolerated(taints: tuple[Taint, ...], tolerations: tuple[Toleration, ...]) -> list[Taint]:
    return [
        t
        for t in taints
        if t.effect in BLOCKING_EFFECTS and not any(tol.tolerates(t) for tol in tolerations)
    ]


def _widen(a: IntArray, n: int, rows: int, width: int, fill: int) -> IntArray:
    out = np.full((rows, width), fill, dtype=np.int64)
    out[:n, : a.shape[1]] = a[:n]
    return out


def _whole_idle(g: GpuState) -> bool:
    """A healthy card nothing is on: no pod, and all of it free (all MIG instances free)."""
    if not g.healthy or g.pods:
        return False
    if g.mode is SharingMode.MIG:
        return not any(g.mig_used.values())
    return g.milli_free >= MILLI_PER_GPU


_CARD_FIELDS = attrgetter(
    "index", "milli_free", "mode", "units", "units_free", "healthy", "slots_free", "memory_free_mib"
)


def _card_key(g: GpuState) -> tuple[object, ...]:
    return (
        _CARD_FIELDS(g),
        bool(g.pods),
        tuple(g.mig_free.items()) if g.mig_free else (),
        any(g.mig_used.values()) if g.mig_used else False,
        g.memory_total_mib if g.mode is SharingMode.HAMI else None,  # read for HAMi only
    )


_NODE_FIELDS = attrgetter(
    "cpu_milli_allocatable",
    "cpu_milli_requested",
    "memory_mib_allocatable",
    "memory_mib_requested",
    "unschedulable",
    "gpu_model",
    "pool",
    "taints",
    "mig_device_profile",
    "gpu_shared_resource",
    "gpu_dra",
)


def row_key(profile: NodeProfile) -> tuple[object, ...]:
    """Everything of a node's profile that its row reads (``upsert``), and nothing else: two
    profiles with one key make one row. Most of a live cluster's node changes are GPU samples,
    which move a card's memory in use and its health clock but no capacity; at 10,000 nodes
    rebuilding the row for each (its cards, its state, its fragment) was about a seventh of an
    ingested sample's cost, and it moved ``version``, dropping every cache kept per version."""
    return (_NODE_FIELDS(profile), tuple(map(_card_key, profile.gpus)))


def _rule(cards: tuple[GpuState, ...]) -> tuple[int, int]:
    whole = [g for g in cards if g.mode is not SharingMode.MIG]
    mode = whole[0].mode if whole else SharingMode.MILLI
    if mode is SharingMode.EXCLUSIVE:
        return RULE_FIXED, MILLI_PER_GPU
    if mode is SharingMode.TIME_SLICED:
        # a card with k free replicas shows round(k * 1000 / R) milli: one replica is there
        # exactly when at least 1000 // R (and at least 1) is
        return RULE_SLICED, max(1, MILLI_PER_GPU // whole[0].units)
    if mode is SharingMode.HAMI:
        return RULE_HAMI, 0
    return RULE_MILLI, 0


class CapacityIndex:
    def __init__(self, measure: FragMeasure) -> None:
        self.measure = measure
        self.slot: dict[str, int] = {}
        self.names: list[str | None] = []
        self._free_slots: list[int] = []
        self._used = 0  # rows ever handed out; rows beyond it are spare capacity
        self.version = 0
        """Moves on every node change: what is derived from the free capacity (the pending
        explanations' per-class masks, ``request_class``) is kept for one version."""
        self.names_version = 0
        """Moves when a node comes or goes (its row's name changes)."""
        self.row_version: IntArray = np.zeros(0, dtype=np.int64)
        """``version`` when each row last changed: what is derived from one row (the
        extender's per-node scores) is kept while it stays."""
        self.width = 1
        self.active: BoolArray = np.zeros(0, dtype=bool)
        self.cpu_free: IntArray = np.zeros(0, dtype=np.int64)
        self.mem_free: IntArray = np.zeros(0, dtype=np.int64)
        self.cpu_alloc: IntArray = np.zeros(0, dtype=np.int64)
        self.mem_alloc: IntArray = np.zeros(0, dtype=np.int64)
        self.gpu_free: IntArray = np.zeros((0, 1), dtype=np.int64)
        """Idle milli-GPU per whole card (MIG cards' idle is in ``mig_idle``)."""
        self.cores_free: IntArray = np.full((0, 1), -1, dtype=np.int64)
        """HAMi: free core milli per card, -1 where no vGPU can be handed out."""
        self.hmem_free: IntArray = np.full((0, 1), -1, dtype=np.int64)
        """HAMi: card memory not yet promised, MiB."""
        self.slots_free: IntArray = np.zeros((0, 1), dtype=np.int64)
        """HAMi: vGPUs still to hand out per card."""
        self.replicas_free: IntArray = np.zeros((0, 1), dtype=np.int64)
        """Time-sliced: free replicas per card (several may serve one pod)."""
        self.rule: IntArray = np.zeros(0, dtype=np.int64)
        self.fixed: IntArray = np.zeros(0, dtype=np.int64)
        """RULE_FIXED and RULE_SLICED: what one device takes of a card, in milli (1000, or
        one replica)."""
        self.hami_memory: IntArray = np.zeros(0, dtype=np.int64)
        self.mig_idle: IntArray = np.zeros(0, dtype=np.int64)
        self.mig_free: dict[int, dict[str, int]] = {}
        self.mig_each: dict[int, dict[str, float]] = {}
        self.single: dict[int, str] = {}
        self.shared_name: IntArray = np.zeros(0, dtype=np.int64)
        """Which name the cards are asked for by: ``resource_name`` of the node's profile."""
        """Nodes in MIG's single strategy, and their one profile."""
        self.gpu_count: IntArray = np.zeros(0, dtype=np.int64)  # device slots (highest index+1)
        self.gpu_cards: IntArray = np.zeros(0, dtype=np.int64)  # cards listed
        self.unschedulable: BoolArray = np.zeros(0, dtype=bool)
        self.models: list[str | None] = []
        self.taints: dict[int, tuple[Taint, ...]] = {}
        self._blocked: dict[tuple[Toleration, ...], BoolArray] = {}
        """taint_blocked per set of tolerations, until a node changes: an evaluation round
        asks it for every pending pod, and most pods share a few sets of tolerations."""
        self.pools: list[str | None] = []
        self.node_frag: FloatArray = np.zeros(0, dtype=np.float64)
        self.states: dict[int, NodeState] = {}
        """Each node's state as its fragment was measured on: new typical pods re-measure
        every node from these (a memo lookup each) instead of rebuilding 10,000 states."""
        self._keys: dict[int, tuple[object, ...]] = {}
        """Each row's ``row_key``, to tell a change of capacity from one of telemetry."""
        self.node_idle: IntArray = np.zeros(0, dtype=np.int64)
        self.node_unhealthy: IntArray = np.zeros(0, dtype=np.int64)
        """Cards out of service per node."""
        self.node_whole_idle: IntArray = np.zeros(0, dtype=np.int64)
        """Healthy cards with nothing on them per node."""
        self._frag_q = 0
        """The cluster's fragment in ``FRAG_QUANTUM`` units (see ``frag_milli``)."""
        self.idle_milli = 0
        self.capacity_milli = 0
        self.whole_idle_cards = 0
        self.groups: dict[Group, GroupTotals] = {}
        """Running totals by (pool, GPU model), "" for none: as few as the cluster's pools
        times its models, updated on a node's change like the cluster totals."""

    def __len__(self) -> int:
        return len(self.slot)

    # --- maintenance ---------------------------------------------------------------------

    def _grow(self, rows: int, width: int) -> None:
        n = len(self.names)
        if rows <= n and width <= self.width:
            return
        new_n = max(rows, n)
        new_w = max(width, self.width)

        self.active = _extend(self.active, new_n, False)
        self.row_version = _extend(self.row_version, new_n, -1)
        self.cpu_free = _extend(self.cpu_free, new_n, 0)
        self.mem_free = _extend(self.mem_free, new_n, 0)
        self.cpu_alloc = _extend(self.cpu_alloc, new_n, 0)
        self.mem_alloc = _extend(self.mem_alloc, new_n, 0)
        self.gpu_count = _extend(self.gpu_count, new_n, 0)
        self.gpu_cards = _extend(self.gpu_cards, new_n, 0)
        self.unschedulable = _extend(self.unschedulable, new_n, False)
        self.node_frag = _extend(self.node_frag, new_n, 0.0)
        self.node_idle = _extend(self.node_idle, new_n, 0)
        self.node_unhealthy = _extend(self.node_unhealthy, new_n, 0)
        self.node_whole_idle = _extend(self.node_whole_idle, new_n, 0)
        self.rule = _extend(self.rule, new_n, RULE_MILLI)
        self.fixed = _extend(self.fixed, new_n, 0)
        self.hami_memory = _extend(self.hami_memory, new_n, 0)
        self.mig_idle = _extend(self.mig_idle, new_n, 0)
        self.shared_name = _extend(self.shared_name, new_n, 0)
        self.gpu_free = _widen(self.gpu_free, n, new_n, new_w, 0)
        self.cores_free = _widen(self.cores_free, n, new_n, new_w, -1)
        self.replicas_free = _widen(self.replicas_free, n, new_n, new_w, 0)
        self.slots_free = _widen(self.slots_free, n, new_n, new_w, 0)
        self.hmem_free = _widen(self.hmem_free, n, new_n, new_w, -1)
        self.width = new_w
        self.names.extend([None] * (new_n - n))
        self.models.extend([None] * (new_n - n))
        self.pools.extend([None] * (new_n - n))

    def upsert(self, profile: NodeProfile) -> bool:
        """Whether the node's row changed (a node new to the index always does)."""
        key = row_key(profile)
        i = self.slot.get(profile.name)
        if i is not None and self._keys.get(i) == key:
            return False
        # Device indices may have gaps (a card that fell off the bus is no longer listed): the
        # row is as wide as the highest index, the missing slots stay at 0 free.
        slots = max([1] + [g.index + 1 for g in profile.gpus])
        if i is None:
            if self._free_slots:
                i = self._free_slots.pop()
            else:
                i = self._used
                self._used += 1
            rows = len(self.names)
            self._grow(rows if i < rows else rows * 3 // 2 + 8, slots)
            self.slot[profile.name] = i
            self.names[i] = profile.name
            self.names_version += 1
        else:
            self._grow(len(self.names), slots)
            self._forget_totals(i)
        self._blocked.clear()
        self.version += 1
        self.row_version[i] = self.version
        self.active[i] = True
        self.cpu_free[i] = profile.cpu_milli_free
        self.mem_free[i] = profile.memory_mib_free
        self.cpu_alloc[i] = profile.cpu_milli_allocatable
        self.mem_alloc[i] = profile.memory_mib_allocatable
        self.gpu_count[i] = slots if profile.gpus else 0
        self.gpu_cards[i] = len(profile.gpus)
        self._put_cards(i, profile)
        self.unschedulable[i] = profile.unschedulable
        self.models[i] = profile.gpu_model
        self.pools[i] = profile.pool
        if profile.taints:
            self.taints[i] = profile.taints
        else:
            self.taints.pop(i, None)
        self._count_totals(i)
        self._keys[i] = key
        return True

    def _put_cards(self, i: int, profile: NodeProfile) -> None:
        self.rule[i], self.fixed[i] = _rule(profile.gpus)
        self.shared_name[i] = resource_name(shared=profile.gpu_shared_resource, dra=profile.gpu_dra)
        if profile.mig_device_profile is not None:
            self.rule[i] = RULE_MIG_SINGLE
            self.single[i] = profile.mig_device_profile
        else:
            self.single.pop(i, None)
        self.gpu_free[i, :] = 0
        self.cores_free[i, :] = -1
        self.hmem_free[i, :] = -1
        self.replicas_free[i, :] = 0
        self.slots_free[i, :] = 0
        mig: dict[str, int] = {}
        each: dict[str, float] = {}
        memory = 0
        self.node_unhealthy[i] = sum(1 for g in profile.gpus if not g.healthy)
        self.node_whole_idle[i] = sum(1 for g in profile.gpus if _whole_idle(g))
        for g in profile.gpus:
            if not g.healthy:
                continue
            if g.mode is SharingMode.MIG:
                for p, n in g.mig_free.items():
                    mig[p] = mig.get(p, 0) + n
                    each[p] = mig_profile_slices(p) * MILLI_PER_GPU / g.units
                continue
            self.gpu_free[i, g.index] = g.milli_free
            if g.mode is SharingMode.TIME_SLICED:
                self.replicas_free[i, g.index] = g.free_units
            if g.mode is SharingMode.HAMI:
                memory = max(memory, int(g.memory_total_mib or 0))
                slots = 1 if g.slots_free is None else g.slots_free
                if slots > 0:  # no vGPU left: nothing fits, whatever cores and memory remain
                    self.slots_free[i, g.index] = slots
                    self.cores_free[i, g.index] = g.free_units
                    self.hmem_free[i, g.index] = (
                        g.memory_free_mib if g.memory_free_mib is not None else 2**40
                    )
        self.hami_memory[i] = memory
        self.mig_idle[i] = round(sum(n * each[p] for p, n in mig.items()))
        if mig:
            self.mig_free[i], self.mig_each[i] = mig, each
        else:
            self.mig_free.pop(i, None)
            self.mig_each.pop(i, None)

    def remove(self, name: str) -> None:
        i = self.slot.pop(name, None)
        if i is None:
            return
        self._forget_totals(i)
        self._blocked.clear()
        self.version += 1
        self.row_version[i] = self.version
        self.names_version += 1
        del self.states[i]
        self._keys.pop(i, None)
        self.active[i] = False
        self.cpu_free[i] = self.mem_free[i] = self.cpu_alloc[i] = self.mem_alloc[i] = 0
        self.gpu_free[i, :] = 0
        self.cores_free[i, :] = -1
        self.hmem_free[i, :] = -1
        self.replicas_free[i, :] = 0
        self.slots_free[i, :] = 0
        self.rule[i] = RULE_MILLI
        self.mig_idle[i] = 0
        self.mig_free.pop(i, None)
        self.mig_each.pop(i, None)
        self.single.pop(i, None)
        self.shared_name[i] = 0
        self.gpu_count[i] = 0
        self.gpu_cards[i] = 0
        self.unschedulable[i] = False
        self.taints.pop(i, None)
        self.names[i] = self.models[i] = self.pools[i] = None
        self._free_slots.append(i)

    def set_measure(self, measure: FragMeasure) -> None:
        """New typical pods: every node's fragment is recomputed (rate-limited by the caller)."""
        self.measure = measure
        self._frag_q = 0
        for i in self.slot.values():
            f = measure.frag_milli(self.states[i])
            self.node_frag[i] = f
            self._frag_q += _quanta(f)

    def state(self, i: int) -> NodeState:
        return self.state_from(
            i,
            cpu=self.cpu_free,
            gpu=self.gpu_free,
            replicas=self.replicas_free,
            cores=self.cores_free,
            hmem=self.hmem_free,
            mig=self.mig_free,
        )

    def state_from(
        self,
        i: int,
        *,
        cpu: IntArray,
        gpu: IntArray,
        replicas: IntArray,
        cores: IntArray,
        hmem: IntArray,
        mig: dict[int, dict[str, int]],
    ) -> NodeState:
        """Node ``i``'s state with its free figures read from the arrays given: the index's
        own, or a what-if copy a request was placed on (the extender's score)."""
        width = int(self.gpu_count[i])
        if self.rule[i] == RULE_MILLI and i not in self.mig_free:
            return node_state(self.models[i], int(cpu[i]), gpu[i, :width].tolist())
        units = replicas if self.rule[i] == RULE_SLICED else cores
        cards = zip(
            gpu[i, :width].tolist(),
            units[i, :width].tolist(),
            hmem[i, :width].tolist(),
            strict=True,
        )
        node_mig = mig.get(i, {})
        each = self.mig_each.get(i, {})
        return (
            "shared",
            self.models[i],
            int(cpu[i]),
            int(self.rule[i]),
            int(self.fixed[i]),
            int(self.hami_memory[i]),
            tuple(sorted(cards, reverse=True)),
            tuple(sorted((p, n, each[p]) for p, n in node_mig.items())),
        )

    def _count_totals(self, i: int) -> None:
        state = self.states[i] = self.state(i)
        f = self.measure.frag_milli(state)
        idle = int(self.gpu_free[i].sum()) + int(self.mig_idle[i])
        self.node_frag[i] = f
        self.node_idle[i] = idle
        self._frag_q += _quanta(f)
        self.idle_milli += idle
        self.capacity_milli += int(self.gpu_cards[i]) * MILLI_PER_GPU
        self.whole_idle_cards += int(self.node_whole_idle[i])
        self._add_group(i, 1)

    def _forget_totals(self, i: int) -> None:
        self._frag_q -= _quanta(float(self.node_frag[i]))
        self.idle_milli -= int(self.node_idle[i])
        self.capacity_milli -= int(self.gpu_cards[i]) * MILLI_PER_GPU
        self.whole_idle_cards -= int(self.node_whole_idle[i])
        self._add_group(i, -1)
        self.node_frag[i] = 0.0
        self.node_idle[i] = 0

    def group_of(self, i: int) -> Group:
        return self.pools[i] or "", self.models[i] or ""

    def _add_group(self, i: int, sign: int) -> None:
        """Node ``i``'s cards into (1) or out of (-1) its pool and model's totals; a group
        left with no cards is dropped, so a pool that is gone leaves no figures behind."""
        if not self.gpu_cards[i]:
            return  # a CPU node: no GPU figures
        key = self.group_of(i)
        totals = self.groups.setdefault(key, GroupTotals())
        totals.cards += sign * int(self.gpu_cards[i])
        totals.idle_milli += sign * int(self.node_idle[i])
        totals.unhealthy += sign * int(self.node_unhealthy[i])
        if totals.cards <= 0:
            del self.groups[key]

    # --- reading ---------------------------------------------------------------------------

    def taint_blocked(self, tolerations: tuple[Toleration, ...]) -> BoolArray:
        blocked = self._blocked.get(tolerations)
        if blocked is None or len(blocked) != len(self.names):
            blocked = np.zeros(len(self.names), dtype=bool)
            for i, taints in self.taints.items():
                if untolerated(taints, tolerations):
                    blocked[i] = True
            blocked.flags.writeable = False
            self._blocked[tolerations] = blocked
        return blocked

    def model_ok(self, gpu_models: tuple[str, ...]) -> BoolArray:
        if not gpu_models:
            return np.ones(len(self.names), dtype=bool)
        allowed = set(gpu_models)
        return np.array([m in allowed for m in self.models], dtype=bool)

    @property
    def frag_milli(self) -> float:
        """The sum of the nodes' fragments, kept as a whole number of quanta: a float running
        total changed with every node's change carries its own rounding history, so a view
        restored from its table (nodes applied in another order) read 7.790448892571041 % where
        the view that lived through the changes read 7.790448892571034 %, and the two runners'
        histories differed in the last digits after a worker restart (the chaos soak)."""
        return self._frag_q / FRAG_QUANTA_PER_MILLI

    @property
    def frag_amount_pct(self) -> float:
        return self.frag_milli / self.capacity_milli * 100.0 if self.capacity_milli else 0.0

    @property
    def frag_ratio_pct(self) -> float:
        return self.frag_milli / self.idle_milli * 100.0 if self.idle_milli else 0.0
