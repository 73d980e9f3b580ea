"""GPU out-of-memory exits read from a container's termination message.

A CUDA allocation failure is no kernel OOM kill: the process raises, exits non-zero, and the
pod status says ``Error``. Only its message (the termination log, or its last log lines with
``terminationMessagePolicy: FallbackToLogsOnError``) says it ran out of GPU memory. These are
the texts CUDA, PyTorch and HAMi's in-container library print for it.
"""

from __future__ import annotations

import re

__all__ = ["CUDA_OOM", "gpu_oom_reason"]

CUDA_OOM = "CudaOOM"
"""The scheduling-event reason gpufrag gives a GPU out-of-memory exit."""

_PATTERNS = (
    # PyTorch: "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 100.00 GiB..."
    re.compile(r"CUDA out of memory", re.IGNORECASE),
    re.compile(r"\btorch\.(?:cuda\.)?OutOfMemoryError\b"),
    # the CUDA runtime's own error name and text
    re.compile(r"\bcudaErrorMemoryAllocation\b|CUDA error: out of memory"),
    # HAMi-core, when a vGPU passes its gpumem cap: "... Device 0 OOM 16106127360 / 8589934592"
    re.compile(r"\bDevice \d+ OOM\b"),
)
_MESSAGE_MAX = 64 * 1024
"""Termination messages are at most 4 KiB (12 KiB for a pod); this bounds a bad one."""


def gpu_oom_reason(message: str | None) -> str | None:
    """``CUDA_OOM`` when the message is a GPU out-of-memory exit, else None."""
    if not message:
        return None
    text = message[:_MESSAGE_MAX]
    return CUDA_OOM if any(p.search(text) for p in _PATTERNS) else None
