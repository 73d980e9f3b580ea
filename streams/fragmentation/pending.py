"""Why a pending pod (or gang) cannot run although the cluster has the free capacity in total.

Every node is checked at once. Unlike kube-scheduler, which reports only a node's first failing
filter, all of a node's blocking reasons are counted, because a capacity planner wants to know
that fixing the taint would still leave the node short of memory. The nodes closest to fitting
are named with what they lack.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from models import ResourceRequest, TaskProfile, Toleration
from models.analysis import BlockReason, Explanation, NearMiss
from streams.fragmentation.capacity import BoolArray, CapacityIndex, IntArray


@dataclass(frozen=True, slots=True)
class _Masks:
    reasons: dict[BlockReason, BoolArray]
    rooms: IntArray

    def any_block(self) -> BoolArray:
        out = np.zeros_like(next(iter(self.reasons.values())))
        for mask in self.reasons.values():
            out |= mask
        return out


def _masks(
    index: CapacityIndex,
    req: ResourceRequest,
    gpu_models: tuple[str, ...],
    tolerations: tuple[Toleration, ...],
    *,
    cpu_free: IntArray | None = None,
    mem_free: IntArray | None = None,
    gpu_free: IntArray | None = None,
) -> _Masks:
    cpu = index.cpu_free if cpu_free is None else cpu_free
    mem = index.mem_free if mem_free is None else mem_free
    gpus = index.gpu_free if gpu_free is None else gpu_free
    active = index.active
    reasons = {
        BlockReason.UNSCHEDULABLE: active & index.unschedulable,
        BlockReason.TAINT: active & index.taint_blocked(tolerations),
        BlockReason.CPU: active & (cpu < req.cpu_milli),
        BlockReason.MEMORY: active & (mem < req.memory_mib),
    }
    rooms = np.zeros(len(active), dtype=np.int64)
    no = np.zeros(len(active), dtype=bool)
    reasons[BlockReason.GPU_MODEL] = no
    reasons[BlockReason.GPU_COUNT] = no
    reasons[BlockReason.GPU_SHARE] = no
    if req.gpu_count > 0:
        has_gpus = index.gpu_count > 0
        reasons[BlockReason.GPU_MODEL] = active & has_gpus & ~index.model_ok(gpu_models)
        rooms = (gpus >= req.gpu_milli).sum(axis=1)
        short = active & (rooms < req.gpu_count)
        split = gpus.sum(axis=1) >= req.total_gpu_milli
        reasons[BlockReason.GPU_SHARE] = short & split
        reasons[BlockReason.GPU_COUNT] = short & ~split
    return _Masks(reasons=reasons, rooms=rooms)


def explain_request(
    index: CapacityIndex,
    req: ResourceRequest,
    *,
    gpu_models: tuple[str, ...] = (),
    tolerations: tuple[Toleration, ...] = (),
    near_miss_nodes: int = 3,
) -> Explanation:
    masks = _masks(index, req, gpu_models, tolerations)
    blocked = masks.any_block()
    active = index.active
    fits_node = bool((active & ~blocked).any())
    fits_total = (
        int(index.cpu_free[active].sum()) >= req.cpu_milli
        and int(index.mem_free[active].sum()) >= req.memory_mib
        and int(index.gpu_free[active].sum()) >= req.total_gpu_milli
    )
    counts = [(r, int(m.sum())) for r, m in masks.reasons.items()]
    blocking = tuple(sorted(((r, n) for r, n in counts if n), key=lambda rn: (-rn[1], rn[0])))
    near = _near_misses(index, req, masks, blocked, near_miss_nodes)
    return Explanation(
        fits_cluster_total=fits_total,
        fits_some_node=fits_node,
        blocking=blocking,
        near_misses=near,
        nodes_checked=int(active.sum()),
    )


def _near_misses(
    index: CapacityIndex, req: ResourceRequest, masks: _Masks, blocked: BoolArray, k: int
) -> tuple[NearMiss, ...]:
    candidates = np.flatnonzero(index.active & blocked)
    if k == 0 or len(candidates) == 0:
        return ()
    miss_cpu = np.maximum(0, req.cpu_milli - index.cpu_free[candidates])
    miss_mem = np.maximum(0, req.memory_mib - index.mem_free[candidates])
    miss_gpu = (
        np.maximum(0, req.gpu_count - masks.rooms[candidates])
        if req.gpu_count
        else (np.zeros(len(candidates), dtype=np.int64))
    )
    hard = np.zeros(len(candidates))
    for r in (BlockReason.UNSCHEDULABLE, BlockReason.TAINT, BlockReason.GPU_MODEL):
        hard += masks.reasons[r][candidates]
    score = (
        hard
        + miss_cpu / max(1, req.cpu_milli)
        + miss_mem / max(1, req.memory_mib)
        + miss_gpu / max(1, req.gpu_count)
    )
    names = [index.names[i] or "" for i in candidates]
    order = sorted(range(len(candidates)), key=lambda j: (float(score[j]), names[j]))[:k]
    out = []
    for j in order:
        i = int(candidates[j])
        reasons = tuple(r for r, m in masks.reasons.items() if m[i])
        out.append(
            NearMiss(
                node=names[j],
                reasons=reasons,
                missing_cpu_milli=int(miss_cpu[j]),
                missing_memory_mib=int(miss_mem[j]),
                missing_gpus=int(miss_gpu[j]),
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

    @property
    def unplaceable(self) -> bool:
        return self.fits_cluster_total and self.placed < self.needed


def check_gang(
    index: CapacityIndex, members: list[TaskProfile], needed: int, *, near_miss_nodes: int = 3
) -> GangCheck:
    """Place ``needed`` members together on a scratch copy of the free capacity.

    Largest requests go first, each to the fitting node with the least free GPU left (best
    fit), which is what a gang scheduler's packing does in the common case; failing that the
    gang cannot start.
    """
    cpu = index.cpu_free.copy()
    mem = index.mem_free.copy()
    gpus = index.gpu_free.copy()
    order = sorted(
        members,
        key=lambda t: (-t.requests.total_gpu_milli, -t.requests.cpu_milli, t.key),
    )[:needed]
    active = index.active
    fits_total = (
        int(cpu[active].sum()) >= sum(t.requests.cpu_milli for t in order)
        and int(mem[active].sum()) >= sum(t.requests.memory_mib for t in order)
        and int(gpus[active].sum()) >= sum(t.requests.total_gpu_milli for t in order)
    )
    placed = 0
    for task in order:
        req = task.requests
        masks = _masks(
            index, req, task.gpu_models, task.tolerations, cpu_free=cpu, mem_free=mem, gpu_free=gpus
        )
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
            )
        node = int(ok[int(np.argmin(gpus[ok].sum(axis=1) * 1_000_000 + cpu[ok] // 1000))])
        cpu[node] -= req.cpu_milli
        mem[node] -= req.memory_mib
        for _ in range(req.gpu_count):
            row = gpus[node]
            fitting = np.flatnonzero(row >= req.gpu_milli)
            card = int(fitting[int(np.argmin(row[fitting]))])
            row[card] -= req.gpu_milli
        placed += 1
    return GangCheck(
        placed=placed, needed=len(order), fits_cluster_total=fits_total, first_failure=None
    )
