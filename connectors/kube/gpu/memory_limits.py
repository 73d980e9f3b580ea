"""A container's GPU memory limit, where something enforces one: HAMi's ``nvidia.com/gpumem``
(the pod's request, read in ``pods``) or CUDA MPS's ``CUDA_MPS_PINNED_DEVICE_MEM_LIMIT``.

A pod that reaches its limit gets out-of-memory errors while the card still has free memory,
so the limit, not the card, is what its usage is measured against.
"""

from __future__ import annotations

import math
import re
from typing import Any

from connectors.kube.objects import MappingError
from models.bounds import GPU_MEMORY_MIB_MAX

__all__ = ["MPS_LIMIT", "mps_limit_mib"]

MPS_LIMIT = "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"
_PAIR = re.compile(r"\s*(\d+)\s*=\s*(\d+)\s*([KMGT]?)B?\s*", re.IGNORECASE)
_MIB_PER = {"": 1 / (1024 * 1024), "K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}


def _limit_mib(container: str, raw: str) -> int:
    """The limit of the first device the container sees (ordinal 0, or the lowest listed):
    a pod on a shared card has one device, and that is the card its usage is read from.
    MPS writes ``0=1G,1=2G``: per device ordinal, binary units, as CUDA does."""
    limits: dict[int, float] = {}
    for part in raw.split(","):
        match = _PAIR.fullmatch(part)
        if match is None:
            raise MappingError(
                f"container {container}: env {MPS_LIMIT}={raw[:60]!r} is not "
                "'<device>=<amount>[K|M|G|T]' pairs separated by ','"
            )
        ordinal, amount, unit = match.groups()
        limits[int(ordinal)] = int(amount) * _MIB_PER[unit.upper()]
    mib = math.ceil(limits[min(limits)])
    if not 0 < mib <= GPU_MEMORY_MIB_MAX:
        raise MappingError(
            f"container {container}: env {MPS_LIMIT}={raw[:60]!r} is outside "
            f"1 MiB..{GPU_MEMORY_MIB_MAX} MiB"
        )
    return mib


def mps_limit_mib(spec: Any) -> int | None:
    """The pod's MPS memory limit: the sum over its containers that set one (their processes
    share the card together); None when none does, or the value comes from a secret or a
    config map gpufrag does not read."""
    total = 0
    found = False
    for c in spec.containers or []:
        for env in c.env or []:
            if env.name == MPS_LIMIT and env.value:
                total += _limit_mib(c.name, env.value)
                found = True
    return min(total, GPU_MEMORY_MIB_MAX) if found else None
