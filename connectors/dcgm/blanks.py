"""DCGM's "no value" sentinels, so that they never reach a sample as numbers.

DCGM reports a field it could not read as a huge number instead of an error (dcgm_structs.h):
``DCGM_INT32_BLANK`` 0x7ffffff0, ``DCGM_INT64_BLANK`` 0x7ffffffffffffff0 and
``DCGM_FP64_BLANK`` 2**47, each followed by NOT_FOUND (+1), NOT_SUPPORTED (+2) and
NOT_PERMISSIONED (+3). Recent dcgm-exporters drop such values; older ones print them (the
exporter's own README shows ``DCGM_FI_DEV_MEMORY_TEMP{...} 9223372036854775794``), and 140 TiB of
used memory would read as the worst OOM aggressor in the cluster.
"""

from __future__ import annotations

import math

__all__ = [
    "DCGM_FP64_BLANK",
    "DCGM_INT32_BLANK",
    "DCGM_INT64_BLANK",
    "blank_kind",
    "is_blank",
]

DCGM_INT32_BLANK = 0x7FFFFFF0
DCGM_INT64_BLANK = 0x7FFFFFFFFFFFFFF0
DCGM_FP64_BLANK = 140737488355328.0  # 2**47

_INT32_MAX = 0x7FFFFFFF
_KINDS = ("blank", "not found", "not supported", "not permissioned")


def is_blank(value: float) -> bool:
    """DCGM's own tests (``DCGM_INT32_IS_BLANK``, ``DCGM_FP64_IS_BLANK``: value >= the blank),
    plus NaN. Every int64 sentinel is above 2**47, so the FP64 test covers them too; the text
    form loses which type a field had, and none of the fields mapped here comes near 2**31."""
    if math.isnan(value):
        return True
    return DCGM_INT32_BLANK <= value <= _INT32_MAX or value >= DCGM_FP64_BLANK


def blank_kind(value: float) -> str | None:
    """Which "no value" DCGM meant, for messages; None for a real value."""
    if not is_blank(value):
        return None
    if math.isnan(value):
        return "NaN"
    for base in (DCGM_INT32_BLANK, DCGM_INT64_BLANK, DCGM_FP64_BLANK):
        offset = value - base
        if offset in (0, 1, 2, 3):
            return _KINDS[int(offset)]
    return "blank"
