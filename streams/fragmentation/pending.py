"""Why a pending pod (or gang) cannot run although the cluster has the free capacity in total.

Every node is checked at once. Unlike kube-scheduler, which reports only a node's first failing
filter, all of a node's blocking reasons are counted, because a capacity planner wants to know
that fixing the taint would still leave the node short of memory. The nodes closest to fitting
are named with what they lack. The per-node masks come from ``masks``; a pod's explanation is
built from its request class's masks, kept per index state (``request_class``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from models import MILLI_PER_GPU, ResourceRequest, TaskProfile, Toleration
from models.analysis import BlockReason, Explanation, NearMiss
from streams.fragmentation import masks as mk
from streams.fragmentation.capacity import BoolArray, CapacityIndex
from streams.fragmentation.masks import Free
from streams.fragmentation.measure import RULE_HAMI, RULE_SLICED
from streams.fragmentation.request_class import (
    ORDER,
    Nodes,
    RequestClass,
    below,
    cache_of,
    class_key,
    nearest,
)

__all__ = [
    "HARD_REASONS",
    "Free",
    "GangCheck",
    "check_gang",
    "explain_request",
    "explain_task",
    "gang_order",
    "hard_blocked",
    "placeable_nodes",
    "take",
]


def explain_request(
    index: CapacityIndex,
    req: ResourceRequest,
    *,
    gpu_models: tuple[str, ...] = (),
    tolerations: tuple[Toleration, ...] = (),
    near_miss_nodes: int = 3,
) -> Explanation:
    cache = cache_of(index)
    key = (class_key(req, gpu_models, tolerations), req.cpu_milli, req.memory_mib, near_miss_nodes)
    found = cache.explanations.get(key)
    if found is not None:  # the same request at the same index state: the same answer
        return found
    cls = cache.request_class(req, gpu_models, tolerations)
    nodes = cache.nodes
    cpu, mem = req.cpu_milli, req.memory_mib
    counts = {
        **cls.counts,
        BlockReason.CPU: below(nodes.cpu_sorted, cpu),
        BlockReason.MEMORY: below(nodes.mem_sorted, mem),
    }
    blocking = tuple(
        sorted(((r, counts[r]) for r in ORDER if counts[r]), key=lambda rn: (-rn[1], rn[0]))
    )
    out = cache.explanations[key] = Explanation(
        fits_cluster_total=(
            nodes.cpu_total >= cpu and nodes.mem_total >= mem and cls.gpu_fits_total
        ),
        fits_some_node=cls.fits_some_node(cpu, mem),
        blocking=blocking,
        near_misses=_near_misses(index, req, cls, nodes, near_miss_nodes),
        nodes_checked=nodes.checked,
    )
    return out


def _near_misses(
    index: CapacityIndex, req: ResourceRequest, cls: RequestClass, nodes: Nodes, k: int
) -> tuple[NearMiss, ...]:
    """The ``k`` blocked nodes closest to fitting, by score then name."""
    if k == 0:
        return ()
    rows, _ = nearest(index, req, cls, nodes.name_rank, k)
    out = []
    for i in rows.tolist():
        cpu_free, mem_free = int(index.cpu_free[i]), int(index.mem_free[i])
        shorts = {
            BlockReason.CPU: cpu_free < req.cpu_milli,
            BlockReason.MEMORY: mem_free < req.memory_mib,
        }
        reasons = tuple(r for r in ORDER if (shorts[r] if r in shorts else cls.reasons[r][i]))
        out.append(
            NearMiss(
                node=index.names[i] or "",
                reasons=reasons,
                missing_cpu_milli=max(0, req.cpu_milli - cpu_free),
                missing_memory_mib=max(0, req.memory_mib - mem_free),
                missing_gpus=int(cls.missing[i]),
            )
        )
    return tuple(out)


def explain_task(
    index: CapacityIndex, task: TaskProfile, *, near_miss_nodes: int = 3
) -> Explanation:
    return explain_request(
        index,
        task.requests,
        gpu_models=task.gpu_models,
        tolerations=task.tolerations,
        near_miss_nodes=near_miss_nodes,
    )


@dataclass(frozen=True, slots=True)
class GangCheck:
    placed: int  # members that found room together
    needed: int
    fits_cluster_total: bool
    first_failure: Explanation | None  # the member that found no room, checked alone
    failed: str | None = None
    """The key of that member."""

    @property
    def unplaceable(self) -> bool:
        return self.fits_cluster_total and self.placed < self.needed


def gang_order(members: list[TaskProfile]) -> list[TaskProfile]:
    """A gang's members in the order a gang check places them: largest request first."""
    return sorted(
        members, key=lambda t: (-t.requests.total_gpu_milli, -t.requests.cpu_milli, t.key)
    )


def check_gang(
    index: CapacityIndex, members: list[TaskProfile], needed: int, *, near_miss_nodes: int = 3
) -> GangCheck:
    """Place ``needed`` members together on a scratch copy of the free capacity.

    Largest requests go first, each to the fitting node with the least free GPU left (best
    fit), which is what a gang scheduler's packing does in the common case; failing that the
    gang cannot start.
    """
    free = Free.of(index).copy()
    order = gang_order(members)[:needed]
    active = index.active
    fits_total = (
        int(free.cpu[active].sum()) >= sum(t.requests.cpu_milli for t in order)
        and int(free.mem[active].sum()) >= sum(t.requests.memory_mib for t in order)
        and mk.fits_total(index, free, [t.requests for t in order])
    )
    placed = 0
    for task in order:
        req = task.requests
        masks = mk.masks(index, req, task.gpu_models, task.tolerations, free)
        ok = np.flatnonzero(active & ~masks.any_block())
        if len(ok) == 0:
            return GangCheck(
                placed=placed,
                needed=len(order),
                fits_cluster_total=fits_total,
                first_failure=explain_request(
                    index,
                    req,
                    gpu_models=task.gpu_models,
                    tolerations=task.tolerations,
                    near_miss_nodes=near_miss_nodes,
                ),
                failed=task.key,
            )
        key = free.gpu[ok].sum(axis=1) * 1_000_000 + free.cpu[ok] // 1000
        _take(index, free, int(ok[int(np.argmin(key))]), req)
        placed += 1
    return GangCheck(
        placed=placed, needed=len(order), fits_cluster_total=fits_total, first_failure=None
    )


def _take(
    index: CapacityIndex,
    free: Free,
    node: int,
    req: ResourceRequest,
    cards: Sequence[int] | None = None,
) -> tuple[int, ...]:
    """Charge one member to the node it was placed on, each device on its tightest card or,
    with ``cards``, on those (one per device; ValueError if one lacks the room); returns the
    cards charged."""
    if cards is not None and len(cards) != req.gpu_count:
        raise ValueError(f"{len(cards)} cards named for {req.gpu_count} devices")
    charged: list[int] = []
    free.cpu[node] -= req.cpu_milli
    free.mem[node] -= req.memory_mib
    # one node's figures as Python numbers and lists: a node has a few cards, and numpy's
    # per-call cost on rows that short was most of a what-if (the extender scores 10,000
    # nodes a call, gpufrag bench --case extender)
    milli, cores, mib = mk.need_at(index, req, node)
    hami = bool(index.rule[node] == RULE_HAMI)
    sliced = bool(index.rule[node] == RULE_SLICED)
    if node in index.single:  # whole-GPU requests take instances of the node's profile
        profile = index.single[node]
        free.mig[node][profile] -= req.gpu_count
        req = req.model_copy(update={"gpu_count": 0})
    for k in range(req.gpu_count):
        row = free.gpu[node]
        left = row.tolist()
        if hami:
            core_l, mem_l = free.cores[node].tolist(), free.hmem[node].tolist()
            fitting = [c for c in range(len(left)) if core_l[c] >= cores and mem_l[c] >= mib]
        elif sliced:  # replicas, not the milli figure: it is rounded
            fitting = [c for c, r in enumerate(free.replicas[node].tolist()) if r > 0]
        else:
            fitting = [c for c, g in enumerate(left) if g >= milli]
        if cards is None:
            if not fitting:
                raise ValueError(f"node {index.names[node]} has no card with room")
            card = min(fitting, key=lambda c: (left[c], c))
        elif cards[k] in fitting:
            card = int(cards[k])
        else:
            raise ValueError(f"card {cards[k]} of node {index.names[node]} lacks the room")
        charged.append(card)
        if sliced:
            free.replicas[node, card] -= 1
            row[card] = 0 if free.replicas[node, card] == 0 else max(0, left[card] - milli)
        elif hami:
            free.cores[node, card] -= cores
            free.hmem[node, card] -= mib
            free.slots[node, card] -= 1
            if free.slots[node, card] == 0:
                free.cores[node, card] = -1  # no vGPU left on the card
            total = int(index.hami_memory[node])
            share = mib * MILLI_PER_GPU // total if total else 0
            row[card] = max(0, left[card] - max(cores, share))
        else:
            row[card] -= milli
    for profile, count in req.mig.items():
        free.mig[node][profile] -= count
    return tuple(charged)


# --- what-if placement (planners) ---------------------------------------------------------------

HARD_REASONS = (BlockReason.UNSCHEDULABLE, BlockReason.TAINT, BlockReason.GPU_MODEL)
"""What no eviction on a node changes."""


def placeable_nodes(index: CapacityIndex, free: Free, task: TaskProfile) -> BoolArray:
    """Nodes where ``task`` fits ``free`` (a what-if copy), by every check an explanation
    makes: a planner's proof uses the same rules as the signal that called for it."""
    masks = mk.masks(index, task.requests, task.gpu_models, task.tolerations, free)
    return index.active & ~masks.any_block()


def hard_blocked(index: CapacityIndex, task: TaskProfile) -> BoolArray:
    """Nodes ruled out whatever is freed on them (cordon, taint, GPU model)."""
    masks = mk.masks(index, task.requests, task.gpu_models, task.tolerations, Free.of(index))
    out = np.zeros(len(index.active), dtype=bool)
    for r in HARD_REASONS:
        out |= masks.reasons[r]
    return out | ~index.active


def take(
    index: CapacityIndex,
    free: Free,
    node: int,
    req: ResourceRequest,
    *,
    cards: Sequence[int] | None = None,
) -> tuple[int, ...]:
    """Charge a request to ``node`` in a what-if copy, as a gang check places its members
    (``cards``: on those cards, as an extender's bind chose them); returns the cards."""
    return _take(index, free, node, req, cards)
