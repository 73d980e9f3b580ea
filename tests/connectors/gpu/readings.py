"""NVML readings for the GPU tests, built from the ones captured on a real NVIDIA H200."""

from __future__ import annotations

import json
from typing import Any

from connectors.gpu.reading import NvmlReading, ProcessUse
from tests.paths import H200_DIR

__all__ = ["H200_DIR", "h200_nvml", "reading_of"]


def h200_nvml() -> dict[str, Any]:
    """The H200's NVML readings (``nvml_oom.txt``): idle, after 100 GiB, after freeing it."""
    meta: dict[str, Any] = json.loads((H200_DIR / "nvml_oom.txt").read_text())
    return meta


def reading_of(raw: dict[str, object], meta: dict[str, object]) -> NvmlReading:
    procs = raw["procs"]
    assert isinstance(procs, list)
    return NvmlReading(
        index=0,
        uuid=str(meta["uuid"]),
        name=str(meta["name"]),
        memory_total_bytes=int(str(raw["total"])),
        memory_used_bytes=int(str(raw["used"])),
        gpu_util_pct=float(str(raw["gpu_util"])),
        memory_util_pct=float(str(raw["mem_util"])),
        ecc_uncorrected_volatile=int(str(meta["nvmlDeviceGetTotalEccErrors"])),
        mig_enabled=False,
        processes=tuple(ProcessUse(pid=int(p[0]), used_bytes=int(p[1])) for p in procs),
    )
