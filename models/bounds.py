"""The ranges a real cluster can produce, for every number that comes from outside.

Each edge (kube mapping, DCGM parser, NVML, trace reader, envelope decode) builds models, so a
bound declared here is checked at all of them at once and no edge clamps on its own. Every upper
bound also fits the ClickHouse column the value lands in (sql/migrations), and every integer
fits 64 bits, which orjson needs to serialize an envelope at all: an unbounded int passed every
validator and then failed the whole list when the envelope was written.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from pydantic import Field, ValidationError

__all__ = [
    "COUNT_MAX",
    "CPU_MILLI_MAX",
    "GPUS_MAX",
    "GPU_INDEX_MAX",
    "GPU_MEMORY_MIB_MAX",
    "INT32_MAX",
    "INT32_MIN",
    "MEMORY_MIB_MAX",
    "MIG_DEVICES_MAX",
    "MIG_INSTANCE_MAX",
    "QUOTA_AMOUNT_MAX",
    "REPLICAS_MAX",
    "TIME_MAX",
    "TIME_MIN",
    "XID_CODE_MAX",
    "XID_WINDOW_MS_MAX",
    "Count",
    "CpuMilli",
    "GpuCount",
    "GpuIndex",
    "GpuMemoryMib",
    "GpuMemoryMibFloat",
    "MemoryMib",
    "MigCount",
    "MigInstance",
    "Priority",
    "QuotaAmount",
    "Replicas",
    "XidCode",
    "XidWindowMs",
    "describe",
]

CPU_MILLI_MAX = 4_096_000
"""4,096 cores: the largest single-image servers sold have 1,792 hardware threads; UInt32."""
MEMORY_MIB_MAX = 64 * 1024 * 1024
"""64 TiB of RAM per node or pod (the largest shipped servers have 48 TiB); UInt32."""
GPUS_MAX = 64
"""Cards per node or per pod: 8 in a DGX, 16-20 in the densest PCIe chassis."""
GPU_INDEX_MAX = GPUS_MAX - 1
GPU_MEMORY_MIB_MAX = 1024 * 1024
"""1 TiB per card; the largest shipping card (B200) has 192 GB."""
MIG_INSTANCE_MAX = 255
"""MIG GPU-instance ids are 0-14 on an A100/H100; 255 leaves room and fits UInt16."""
MIG_DEVICES_MAX = 7 * GPUS_MAX
"""At most 7 MIG slices per card."""
REPLICAS_MAX = 1024
"""Time-slicing replicas per card: NVIDIA's examples use 4-48, HAMi defaults to 10."""
XID_CODE_MAX = 9_999
"""NVIDIA's XID catalogue is three digits (up to about 170 in 2024)."""
XID_WINDOW_MS_MAX = 7 * 24 * 3600 * 1000
"""dcgm-exporter counts XIDs over 5 minutes by default; a week fits UInt32 milliseconds."""
COUNT_MAX = 1_000_000_000
"""Event repeats, XID counts, remapped rows, pending workloads: fits UInt32 with room."""
INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1
"""Kubernetes priorities are int32."""
QUOTA_AMOUNT_MAX = 1e15
"""A queue's quota in devices or MiB, cluster-wide: 10^7 cards of 10^8 MiB still fit."""
TIME_MIN = datetime(1970, 1, 1, tzinfo=UTC)
TIME_MAX = datetime(2261, 12, 31, tzinfo=UTC)
"""Inside both ClickHouse's DateTime64 (1900-2299) and 64-bit nanoseconds (to 2262)."""

CpuMilli = Annotated[int, Field(ge=0, le=CPU_MILLI_MAX)]
MemoryMib = Annotated[int, Field(ge=0, le=MEMORY_MIB_MAX)]
GpuCount = Annotated[int, Field(ge=0, le=GPUS_MAX)]
GpuIndex = Annotated[int, Field(ge=0, le=GPU_INDEX_MAX)]
GpuMemoryMib = Annotated[int, Field(ge=0, le=GPU_MEMORY_MIB_MAX)]
GpuMemoryMibFloat = Annotated[float, Field(ge=0, le=GPU_MEMORY_MIB_MAX)]
MigInstance = Annotated[int, Field(ge=0, le=MIG_INSTANCE_MAX)]
MigCount = Annotated[int, Field(ge=0, le=MIG_DEVICES_MAX)]
Replicas = Annotated[int, Field(ge=1, le=REPLICAS_MAX)]
XidCode = Annotated[int, Field(ge=0, le=XID_CODE_MAX)]
XidWindowMs = Annotated[int, Field(ge=1, le=XID_WINDOW_MS_MAX)]
Count = Annotated[int, Field(ge=0, le=COUNT_MAX)]
QuotaAmount = Annotated[float, Field(ge=0, le=QUOTA_AMOUNT_MAX)]
Priority = Annotated[int, Field(ge=INT32_MIN, le=INT32_MAX)]


def _shown(value: object) -> str:
    text = repr(value)
    # A 10^17-core quantity is fine to show; a million-digit one would flood the log.
    return text if len(text) <= 40 else text[:37] + "..."


def describe(exc: ValidationError, *, limit: int = 3) -> str:
    """One line naming each refused field, its value and the rule, for dead letters and CLIs:
    the raw pydantic text spans lines and buries the field name."""
    parts = []
    for err in exc.errors()[:limit]:
        where = ".".join(map(str, err["loc"])) or "value"
        shown = "input" in err and err["type"] != "missing"
        got = f" (got {_shown(err['input'])})" if shown else ""
        parts.append(f"{where}: {err['msg']}{got}")
    more = exc.error_count() - limit
    if more > 0:
        parts.append(f"and {more} more")
    return "; ".join(parts)
