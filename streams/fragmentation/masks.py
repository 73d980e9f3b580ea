"""The per-node checks of a request against the free capacity, as boolean masks over the
capacity index's rows: one mask per blocking reason, the devices each node lacks, and whether
the free total covers the request. The pending explanations (``pending``), their per-class
cache (``request_class``) and the gang and what-if checks share them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from models import ResourceRequest, Toleration
from models.analysis import BlockReason
from models.cards import resource_name
from streams.fragmentation.capacity import BoolArray, CapacityIndex, IntArray
from streams.fragmentation.measure import (
    RULE_FIXED,
    RULE_HAMI,
    RULE_MIG_SINGLE,
    RULE_SLICED,
    NodeState,
)


@dataclass(frozen=True, slots=True)
class Masks:
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

    def state(self, index: CapacityIndex, i: int) -> NodeState:
        """Node ``i``'s state with these free figures: what its fragment is measured on."""
        return index.state_from(
            i,
            cpu=self.cpu,
            gpu=self.gpu,
            replicas=self.replicas,
            cores=self.cores,
            hmem=self.hmem,
            mig=self.mig,
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
class Need:
    """What one device of a request takes on each node, by the node's sharing rule."""

    milli: IntArray
    cores_milli: int
    memory_mib: IntArray
    shared_name: int
    """``resource_name``: kube-scheduler counts each name as its own resource."""
    hami_only: bool
    """A request with HAMi's gpumem or gpucores: only HAMi's scheduler places it, on the
    cards HAMi registered; kube-scheduler finds no such resource on other nodes."""


def need_of(index: CapacityIndex, req: ResourceRequest) -> Need:
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
    return Need(
        milli=milli,
        cores_milli=cores,
        memory_mib=memory,
        hami_only=hami_only,
        shared_name=resource_name(shared=req.gpu_shared_resource, dra=req.gpu_dra),
    )


def need_at(index: CapacityIndex, req: ResourceRequest, node: int) -> tuple[int, int, int]:
    """``need_of``'s figures for one node: (milli of one device, HAMi core milli, HAMi memory
    MiB), without building them for every node."""
    cores = 0 if req.gpu_cores_pct is None else req.gpu_cores_pct * 10
    rule = int(index.rule[node])
    if rule == RULE_HAMI:
        milli = max(1, cores)
    elif rule in (RULE_FIXED, RULE_SLICED):
        milli = int(index.fixed[node])
    else:
        milli = req.gpu_milli
    if req.gpu_memory_mib is not None:
        memory = req.gpu_memory_mib
    elif req.gpu_memory_pct is not None:
        memory = int(index.hami_memory[node]) * req.gpu_memory_pct // 100
    else:
        memory = int(index.hami_memory[node])
    return milli, cores, memory


def device_rooms(index: CapacityIndex, free: Free, need: Need) -> tuple[IntArray, IntArray]:
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
    # kube-scheduler counts nvidia.com/gpu, nvidia.com/gpu.shared and DRA devices apart
    other_name = (index.shared_name != need.shared_name)[:, None]
    return np.where(other_name, 0, compute), np.where(other_name, 0, full)


def single_rooms(index: CapacityIndex, free: Free, need: Need) -> IntArray:
    """Per node in MIG's single strategy: the free instances a whole-GPU request can take."""
    out = np.zeros(len(index.active), dtype=np.int64)
    if not need.hami_only:
        for i, profile in index.single.items():
            out[i] = free.mig.get(i, {}).get(profile, 0)
    return out


def mig_short(index: CapacityIndex, free: Free, req: ResourceRequest) -> tuple[IntArray, BoolArray]:
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


def masks(
    index: CapacityIndex,
    req: ResourceRequest,
    gpu_models: tuple[str, ...],
    tolerations: tuple[Toleration, ...],
    free: Free,
) -> Masks:
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
        need = need_of(index, req)
        compute, fits = device_rooms(index, free, need)
        single = single_rooms(index, free, need)
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
        lacking, any_free = mig_short(index, free, req)
        short = active & (lacking > 0)
        reasons[BlockReason.MIG_PROFILE] = short & any_free
        reasons[BlockReason.GPU_COUNT] = reasons[BlockReason.GPU_COUNT] | (short & ~any_free)
        missing += lacking
    return Masks(reasons=reasons, missing=missing)


def devices_free(index: CapacityIndex, free: Free, req: ResourceRequest) -> float:
    """How many devices of ``req`` the cluster's free capacity holds in total, ignoring which
    node and card it is on: free milli-GPU over the share one device takes, free replicas, or
    on HAMi cards the smaller of their free cores and memory over what one vGPU takes (each
    card at most its free vGPUs). What "fits the free total" weighs a request against."""
    need = need_of(index, req)
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
    single = single_rooms(index, free, need)
    return float(np.where(hami, vgpus, shares + single)[nodes | (single > 0)].sum())


def fits_total(index: CapacityIndex, free: Free, reqs: list[ResourceRequest]) -> bool:
    """Whether the cluster's free GPU, summed over nodes, would cover all of ``reqs`` at once
    (each one's devices as a share of what is free for it)."""
    share = 0.0
    for req in reqs:
        if req.gpu_count > 0:
            total = devices_free(index, free, req)
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
