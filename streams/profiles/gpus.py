"""Which card holds what: free share per GPU from the pods bound to a node.

Pods whose devices are known (``gpu_indices``) are charged to those cards. Pods without them (a
watcher rarely sees device ids) are laid on the cards the way the device plugin would, in a
fixed order, so the result is a pure function of the set of bound pods: an incremental update
and a recomputation from scratch agree by construction.
"""

from __future__ import annotations

from collections.abc import Iterable

from models import MILLI_PER_GPU, ResourceRequest


def free_per_gpu(
    gpu_count: int, bound: Iterable[tuple[str, ResourceRequest, tuple[int, ...]]]
) -> tuple[list[int], int]:
    """Free milli-GPU per card, and the milli-GPU that found no card (an overcommitted node)."""
    free = [MILLI_PER_GPU] * gpu_count
    unplaced = 0
    pending: list[tuple[str, ResourceRequest]] = []
    for key, req, indices in bound:
        if req.gpu_count == 0:
            continue
        if len(indices) == req.gpu_count and all(0 <= i < gpu_count for i in indices):
            for i in indices:
                take = min(free[i], req.gpu_milli)
                free[i] -= take
                unplaced += req.gpu_milli - take
        else:
            pending.append((key, req))
    # Largest shares first, then by key: whole cards take the lowest free indices and shares
    # the tightest card with room, as the device plugins hand them out.
    pending.sort(key=lambda kr: (-kr[1].gpu_milli, -kr[1].gpu_count, kr[0]))
    for _, req in pending:
        for _ in range(req.gpu_count):
            fitting = [i for i in range(gpu_count) if free[i] >= req.gpu_milli]
            if not fitting:
                unplaced += req.gpu_milli
                continue
            best = min(fitting, key=lambda i: (free[i], i))
            free[best] -= req.gpu_milli
    return free, unplaced
