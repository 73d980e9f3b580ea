"""One GPU's telemetry at one instant (dcgm-exporter scrape or NVML sampler)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from models.base import Frozen
from models.bounds import Count, GpuIndex, GpuMemoryMibFloat, MigInstance, XidCode, XidWindowMs

__all__ = ["GpuSample"]

PodKey = Annotated[str, Field(pattern=r"^(?:[^/]+/[^/]+|uid:[^/]+)$", max_length=317)]
"""A pod's "namespace/name" (63 + 1 + 253 characters at most), or "uid:<uid>" where only its
cgroup named it (the join knows which pod has that uid)."""


class GpuSample(Frozen):
    """Every metric is optional: exporters differ in what they report, and a missing value must
    stay unknown rather than read as zero (zero used memory would hide an OOM aggressor)."""

    node: Annotated[str, Field(min_length=1)]
    gpu_index: GpuIndex
    uuid: str | None = None
    model: str | None = None
    """Raw product name as the exporter reports it (e.g. "NVIDIA H200"), hence unchecked."""
    memory_total_mib: GpuMemoryMibFloat | None = None
    memory_used_mib: GpuMemoryMibFloat | None = None
    memory_reserved_mib: GpuMemoryMibFloat | None = None
    utilization_pct: Annotated[float, Field(ge=0, le=100)] | None = None
    engine_active: Annotated[float, Field(ge=0, le=1)] | None = None
    xid: XidCode | None = None
    xid_from: Literal["gauge", "events"] | None = None
    """What ``xid`` is: the last XID since the driver loaded, read again at every scrape
    (dcgm-exporter's gauge; None there means none), or an XID that fired since the last
    reading (NVML's events; None means none fired, not a reset). None: not said (read as a
    gauge)."""
    mig_profile: str | None = None
    mig_instance: MigInstance | None = None
    pod: str | None = None
    namespace: str | None = None
    container: str | None = None
    pod_memory_mib: dict[PodKey, GpuMemoryMibFloat] | None = None
    """Pod ("namespace/name" or "uid:<uid>") -> MiB its processes hold on this card (NVML's
    per-process figures): on a shared card, each pod's own usage. None: the source does not
    split it."""
    xid_counts: dict[XidCode, Count] | None = None
    """XID code -> times it fired within the last ``xid_window_ms`` (dcgm-exporter's
    DCGM_EXP_XID_ERRORS_COUNT). Empty means the source looked and saw none; None means the
    source does not count them. A count tells a storm from the one stale ``xid`` a card keeps
    reporting until its driver restarts."""
    xid_window_ms: XidWindowMs | None = None
    rows_remapped_correctable: Count | None = None
    """HBM rows replaced after correctable errors; a rising count is a card wearing out."""
    rows_remapped_uncorrectable: Count | None = None
    row_remap_pending: bool | None = None
    """A remap waits for a GPU reset: the card keeps failing (XID 63/64) until it is drained."""
    row_remap_failed: bool | None = None
    """Remapping ran out of spare rows: the card needs service, not a reset."""
    ecc_uncorrected_volatile: Count | None = None
    """Uncorrectable (double-bit) ECC errors since the driver loaded; a rise is a new error,
    a drop means the card was reset."""

    @model_validator(mode="after")
    def _used_within_total(self) -> GpuSample:
        total, used = self.memory_total_mib, self.memory_used_mib
        if total is not None and used is not None and used > total:
            raise ValueError(f"memory_used_mib={used} exceeds memory_total_mib={total}")
        return self
