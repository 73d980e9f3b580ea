"""The dcgm-exporter metrics that feed a GpuSample, and what a valid value of each looks like.

Units follow the NVML sampler: memory in MiB (dcgm-exporter's FB fields already are),
utilization in percent, engine activity as a 0..1 ratio.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["FIELDS", "XID_COUNT", "FieldSpec", "check"]

Kind = Literal["mib", "pct", "ratio", "count", "flag", "xid"]

XID_COUNT = "DCGM_EXP_XID_ERRORS_COUNT"
"""The exporter's own XID counter: one line per (GPU, XID) fired in its window."""


@dataclass(frozen=True, slots=True)
class FieldSpec:
    slot: str
    """The GpuSample field the value feeds, which also gives its range; ``memory_free_mib`` is
    no sample field (it only adds up to the total) and takes ``memory_total_mib``'s range."""
    kind: Kind

    @property
    def like(self) -> str:
        return "memory_total_mib" if self.slot == "memory_free_mib" else self.slot


FIELDS: dict[str, FieldSpec] = {
    "DCGM_FI_DEV_FB_USED": FieldSpec("memory_used_mib", "mib"),
    "DCGM_FI_DEV_FB_FREE": FieldSpec("memory_free_mib", "mib"),
    "DCGM_FI_DEV_FB_RESERVED": FieldSpec("memory_reserved_mib", "mib"),
    "DCGM_FI_DEV_FB_TOTAL": FieldSpec("memory_total_mib", "mib"),
    "DCGM_FI_DEV_GPU_UTIL": FieldSpec("utilization_pct", "pct"),
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": FieldSpec("engine_active", "ratio"),
    "DCGM_FI_DEV_XID_ERRORS": FieldSpec("xid", "xid"),
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": FieldSpec("rows_remapped_correctable", "count"),
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": FieldSpec("rows_remapped_uncorrectable", "count"),
    "DCGM_FI_DEV_ROW_REMAP_PENDING": FieldSpec("row_remap_pending", "flag"),
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": FieldSpec("row_remap_failed", "flag"),
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": FieldSpec("ecc_uncorrected_volatile", "count"),
}


def _whole(value: float) -> int:
    if value != int(value):
        raise ValueError(f"{value} is not a whole number")
    return int(value)


def check(kind: Kind, value: float) -> float | int | bool | None:
    """The value as the sample holds it, or ValueError naming what is wrong with it; a value
    that cannot be right is refused rather than clamped, so the source's fault shows."""
    if value < 0:
        raise ValueError(f"negative value {value}")
    match kind:
        case "mib":
            return float(value)
        case "pct":
            if value > 100:
                raise ValueError(f"{value} % is over 100")
            return float(value)
        case "ratio":
            if value > 1:
                raise ValueError(f"ratio {value} is over 1")
            return float(value)
        case "count":
            return _whole(value)
        case "flag":
            if value not in (0, 1):
                raise ValueError(f"{value} is not 0 or 1")
            return bool(value)
        case "xid":
            # 0 (no XID since the driver loaded) is kept as 0 here: it is a reading, and a
            # blank line for the same card must still count as a different one
            return _whole(value)
