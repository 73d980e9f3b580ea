"""Why a pending pod (or gang) cannot run although the cluster has the free capacity in total.

Every node is checked at once. Unlike kube-scheduler, which reports only a node's first failing
filter, all of a node's blocking reasons are counted, because a capacity planner wants to know
that fixing the taint would still leave the node short of memory. The nodes closest to fitting
are named with what they lack.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from models import MILLI_PER_GPU, ResourceRequest, TaskProfile, Toleration
from models.analysis import BlockReason, Explanation, NearMiss
from streams.fragmentation.capacity import BoolArray, CapacityIndex, IntArray
from streams.fragmentation.measure import RULE_FIXED, RULE_HAMI, RULE_MIG_SINGLE, RULE_SLICED


@dataclass(frozen=True, slots=True)
class _Masks:
    reasons: dict[BlockReason, BoolArray]
    missing: IntArray
    """Devices or MIG instances each node lacks for the request."""

    def any_block(self) -> BoolArray:
        out = np.zeros_like(next(iter(self.reasons.values())))
        for mask in self.reasons.values():
            out |= mask
        return out


@dataclass(slots=True)
class Free:
    """What is free, as arrays a gang check can take from without touching the index."""

    cpu: IntArray
    mem: IntArray
    gpu: IntArray
    replicas: IntArray
    slots: IntArray
    cores: IntArray
    hmem: IntArray
    mig: dict[int, dict[str, int]]

    @classmethod
    def of(cls, index: CapacityIndex) -> Free:
        """The index's own arrays, read only."""
        return cls(
            index.cpu_free,
            index.mem_free,
            index.gpu_free,
            index.replicas_free,
            index.slots_free,
            index.cores_free,
            index.hmem_free,
            index.mig_free,
        )

    def copy(self) -> Free:
        """A scratch copy to place on."""
        return Free(
            self.cpu.copy(),
            self.mem.copy(),
            self.gpu.copy(),
            self.replicas.copy(),
            self.slots.copy(),
            self.cores.copy(),
            self.hmem.copy(),
            {i: dict(m) for i, m in self.mig.items()},
        )


@dataclass(frozen=True, slots=True)
class _Need:
    """What one device of a request takes on each node, by the node's sharing rule."""

    milli: IntArray
    cores_milli: int
    memory_mib: IntArray
    shared_name: bool
    hami_only: bool
    """A request with HAMi's gpumem or gpucores: only HAMi's scheduler places it, on the
    cards HAMi registered; kube-scheduler finds no such resource on other nodes."""


def _need(index: CapacityIndex, req: ResourceRequest) -> _Need:
    cores = 0 if req.gpu_cores_pct is None else req.gpu_cores_pct * 10
    hami = index.rule == RULE_HAMI
    milli = np.where(
        (index.rule == RULE_FIXED) | (index.rule == RULE_SLICED), index.fixed, req.gpu_milli
    )
    milli = np.where(hami, max(1, cores), milli)
    if req.gpu_memory_mib is not None:
        memory = np.full(len(index.rule), req.gpu_memory_mib, dtype=np.int64)
    elif req.gpu_memory_pct is not None:
        memory = index.hami_memory * req.gpu_memory_pct // 100
    else:
        memory = index.hami_memory
    hami_only = req.is_hami
    return _Need(
        milli=milli,
        cores_milli=cores,
        memory_mib=memory,
        hami_only=hami_only,
        shared_name=req.gpu_shared_resource,
    )


def _device_rooms(index: CapacityIndex, free: Free, need: _Need) -> tuple[IntArray, IntArray]:
    """Per card: how many devices of the request its compute would serve, and how many it
    serves in full. A time-sliced card serves one per free replica (the device plugin hands
    one pod several replicas of one card); a HAMi card one vGPU per pod; a milli-GPU or
    exclusive card as many shares as fit."""
    hami = (index.rule == RULE_HAMI)[:, None]
    sliced = (index.rule == RULE_SLICED)[:, None]
    shares = np.where(sliced, free.replicas, free.gpu // np.maximum(need.milli, 1)[:, None])
    if need.hami_only:
        shares = np.zeros_like(shares)
    cores_ok = (free.cores >= need.cores_milli).astype(np.int64)
    compute = np.where(hami, cores_ok, shares)
    memory = free.hmem >= need.memory_mib[:, None]
    full = np.where(hami, cores_ok * memory, shares)
    # kube-scheduler counts nvidia.com/gpu and nvidia.com/gpu.shared as two resources
    other_name = (index.shared_name != need.shared_name)[:, None]
    return np.where(other_name, 0, compute), np.where(other_name, 0, full)


def _single_rooms(index: CapacityIndex, free: Free, need: _Need) -> IntArray:
    """Per node in MIG's single strategy: the free instances a whole-GPU request can take."""
    out = np.zeros(len(index.active), dtype=np.int64)
    if not need.hami_only:
        for i, profile in index.single.items():
            out[i] = free.mig.get(i, {}).get(profile, 0)
    return out


def _mig_short(
    index: CapacityIndex, free: Free, req: ResourceRequest
) -> tuple[IntArray, BoolArray]:
    missing = np.zeros(len(index.active), dtype=np.int64)
    any_free = np.zeros(len(index.active), dtype=bool)
    for i, instances in free.mig.items():
        any_free[i] = any(n > 0 for n in instances.values())
    for profile, count in req.mig.items():
        have = np.zeros(len(index.active), dtype=np.int64)
        for i, instances in free.mig.items():
            have[i] = instances.get(profile, 0)
        missing += np.maximum(0, count - have)
    return missing, any_free


def _masks(
    index: CapacityIndex,
    req: ResourceRequest,
    gpu_models: tuple[str, ...],
    tolerations: tuple[Toleration, ...],
    free: Free,
) -> _Masks:
    active = index.active
    reasons = {
        BlockReason.UNSCHEDULABLE: active & index.unschedulable,
        BlockReason.TAINT: active & index.taint_blocked(tolerations),
        BlockReason.CPU: active & (free.cpu < req.cpu_milli),
        BlockReason.MEMORY: active & (free.mem < req.memory_mib),
    }
    missing = np.zeros(len(active), dtype=np.int64)
    no = np.zeros(len(active), dtype=bool)
    for r in (
        BlockReason.GPU_MODEL,
        BlockReason.GPU_COUNT,
        BlockReason.GPU_SHARE,
        BlockReason.GPU_MEMORY,
        BlockReason.MIG_PROFILE,
    ):
        reasons[r] = no
    if req.gpu_count > 0 or req.mig:
        has_gpus = index.gpu_cards > 0
        reasons[BlockReason.GPU_MODEL] = active & has_gpus & ~index.model_ok(gpu_models)
    if req.gpu_count > 0:
        need = _need(index, req)
        compute, fits = _device_rooms(index, free, need)
        single = _single_rooms(index, free, need)
        rooms = fits.sum(axis=1) + single
        short = active & (rooms < req.gpu_count)
        memory_short = short & (compute.sum(axis=1) + single >= req.gpu_count)
        split = free.gpu.sum(axis=1) >= need.milli * req.gpu_count
        split &= (index.rule != RULE_MIG_SINGLE) & (index.shared_name == need.shared_name)
        if need.hami_only:
            split &= index.rule == RULE_HAMI
        reasons[BlockReason.GPU_MEMORY] = memory_short
        reasons[BlockReason.GPU_SHARE] = short & ~memory_short & split
        reasons[BlockReason.GPU_COUNT] = short & ~memory_short & ~split
        missing += np.maximum(0, req.gpu_count - rooms)
    if req.mig:
        lacking, any_free = _mig_short(index, free, req)
        short = active & (lacking > 0)
        reasons[BlockReason.MIG_PROFILE] = short & any_free
        reasons[BlockReason.GPU_COUNT] = reasons[BlockReason.GPU_COUNT] | (short & ~any_free)
        missing += lacking
    return _Masks(reasons=reasons, missing=missing)


def _devices_free(index: CapacityIndex, free: Free, req: ResourceRequest) -> float:
    """How many devices of ``req`` the cluster's free capacity holds in total, ignoring which
    node and card it is on: free milli-GPU over the share one device takes, free replicas, or
    on HAMi cards the smaller of their free cores and memory over what one vGPU takes (each
    card at most its free vGPUs). What "fits the free total" weighs a request against."""
    need = _need(index, req)
    nodes = index.active & (index.gpu_cards > 0) & (index.shared_name == need.shared_name)
    hami = index.rule == RULE_HAMI
    if need.hami_only:
        nodes &= hami
    sliced = index.rule == RULE_SLICED
    shares = np.where(
        sliced, free.replicas.sum(axis=1), free.gpu.sum(axis=1) / np.maximum(need.milli, 1)
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        by_cores = np.where(
            free.cores < 0, 0.0, free.cores / need.cores_milli if need.cores_milli else np.inf
        )
        memory = need.memory_mib[:, None]
        by_memory = np.where(memory > 0, free.hmem / np.maximum(memory, 1), np.inf)
    vgpus = np.minimum(np.minimum(by_cores, by_memory), free.slots).sum(axis=1)
    single = _single_rooms(index, free, need)
    return float(np.where(hami, vgpus, shares + single)[nodes | (single > 0)].sum())


def _fits_total(index: CapacityIndex, free: Free, reqs: list[ResourceRequest]) -> bool:
    """Whether the cluster's free GPU, summed over nodes, would cover all of ``reqs`` at once
    (each one's devices as a share of what is free for it)."""
    share = 0.0
    for req in reqs:
        if req.gpu_count > 0:
            total = _devices_free(index, free, req)
            if total <= 0:
                return False
            share += req.gpu_count / total
    if share > 1.0 + 1e-9:
        return False
    wanted: dict[str, int] = {}
    for req in reqs:
        for profile, count in req.mig.items():
            wanted[profile] = wanted.get(profile, 0) + count
    active = index.active
    for profile, count in wanted.items():
        if sum(m.get(profile, 0) for i, m in free.mig.items() if active[i]) < count:
            return False
    return True


def explain_request(
    index: CapacityIndex,
    req: ResourceRequest,
    *,
    gpu_models: tuple[str, ...] = (),
    tolerations: tuple[Toleration, ...] = (),
    near_miss_nodes: int = 3,
) -> Explanation:
    free = Free.of(index)
    masks = _masks(index, req, gpu_models, tolerations, free)
    blocked = masks.any_block()
    active = index.active
    fits_node = bool((active & ~blocked).any())
    fits_total = (
        int(index.cpu_free[active].sum()) >= req.cpu_milli
        and int(index.mem_free[active].sum()) >= req.memory_mib
        and _fits_total(index, free, [req])
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
    miss_gpu = masks.missing[candidates]
    hard = np.zeros(len(candidates))
    for r in (BlockReason.UNSCHEDULABLE, BlockReason.TAINT, BlockReason.GPU_MODEL):
        hard += masks.reasons[r][candidates]
    score = (
        hard
        + miss_cpu / max(1, req.cpu_milli)
        + miss_mem / max(1, req.memory_mib)
        + miss_gpu / max(1, req.gpu_count + sum(req.mig.values()))
        # a card short only of memory is half a card closer than no card with room at all
        - 0.5 * masks.reasons[BlockReason.GPU_MEMORY][candidates] / max(1, req.gpu_count)
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
        and _fits_total(index, free, [t.requests for t in order])
    )
    placed = 0
    for task in order:
        req = task.requests
        masks = _masks(index, req, task.gpu_models, task.tolerations, free)
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


def _take(index: CapacityIndex, free: Free, node: int, req: ResourceRequest) -> None:
    """Charge one member to the node it was placed on, each device on its tightest card."""
    free.cpu[node] -= req.cpu_milli
    free.mem[node] -= req.memory_mib
    need = _need(index, req)
    hami = bool(index.rule[node] == RULE_HAMI)
    mib = int(need.memory_mib[node])
    sliced = bool(index.rule[node] == RULE_SLICED)
    if node in index.single:  # whole-GPU requests take instances of the node's profile
        profile = index.single[node]
        free.mig[node][profile] -= req.gpu_count
        req = req.model_copy(update={"gpu_count": 0})
    for _ in range(req.gpu_count):
        row = free.gpu[node]
        if hami:
            ok = (free.cores[node] >= need.cores_milli) & (free.hmem[node] >= mib)
        elif sliced:
            ok = free.replicas[node] > 0  # replicas, not the milli figure: it is rounded
        else:
            ok = row >= need.milli[node]
        fitting = np.flatnonzero(ok)
        card = int(fitting[int(np.argmin(row[fitting]))])
        if sliced:
            free.replicas[node, card] -= 1
            row[card] = (
                0 if free.replicas[node, card] == 0 else max(0, row[card] - need.milli[node])
            )
        elif hami:
            free.cores[node, card] -= need.cores_milli
            free.hmem[node, card] -= mib
            free.slots[node, card] -= 1
            if free.slots[node, card] == 0:
                free.cores[node, card] = -1  # no vGPU left on the card
            total = int(index.hami_memory[node])
            share = mib * MILLI_PER_GPU // total if total else 0
            row[card] = max(0, int(row[card]) - max(need.cores_milli, share))
        else:
            row[card] -= need.milli[node]
    for profile, count in req.mig.items():
        free.mig[node][profile] -= count


# --- what-if placement (planners) ---------------------------------------------------------------

HARD_REASONS = (BlockReason.UNSCHEDULABLE, BlockReason.TAINT, BlockReason.GPU_MODEL)
"""What no eviction on a node changes."""


def placeable_nodes(index: CapacityIndex, free: Free, task: TaskProfile) -> BoolArray:
    """Nodes where ``task`` fits ``free`` (a what-if copy), by every check an explanation
    makes: a planner's proof uses the same rules as the signal that called for it."""
    masks = _masks(index, task.requests, task.gpu_models, task.tolerations, free)
    return index.active & ~masks.any_block()


def hard_blocked(index: CapacityIndex, task: TaskProfile) -> BoolArray:
    """Nodes ruled out whatever is freed on them (cordon, taint, GPU model)."""
    masks = _masks(index, task.requests, task.gpu_models, task.tolerations, Free.of(index))
    out = np.zeros(len(index.active), dtype=bool)
    for r in HARD_REASONS:
        out |= masks.reasons[r]
    return out | ~index.active


def take(index: CapacityIndex, free: Free, node: int, req: ResourceRequest) -> None:
    """Charge a request to ``node`` in a what-if copy, as a gang check places its members."""
    _take(index, free, node, req)
