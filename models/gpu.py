"""GPU model names: a closed list, so a typo in a trace or a label is caught at the edge
instead of silently making a pod unplaceable."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator

__all__ = ["KNOWN_GPU_MODELS", "MILLI_PER_GPU", "GpuModel", "check_gpu_model"]

MILLI_PER_GPU = 1000
"""GPU shares are counted in 1/1000 of a card, as in the Alibaba trace and the FGD paper."""

_ALIBABA_TRACE_MODELS = frozenset(
    {
        "P100",
        "T4",
        "V100M16",
        "V100M32",
        "A10",
        "G2",
        "G3",
        "2080",
        "3090",
        "1080",
        "M40",
        "P4",
        "A100",
    }
)
_NVIDIA_MODELS = frozenset(
    {
        "A100-40GB",
        "A100-80GB",
        "H100",
        "H100-80GB",
        "H200",
        "L4",
        "L40S",
        "A30",
        "A10G",
        "V100",
        "T4G",
        "B200",
        "GB200",
    }
)

KNOWN_GPU_MODELS: frozenset[str] = _ALIBABA_TRACE_MODELS | _NVIDIA_MODELS


def check_gpu_model(name: str) -> str:
    """Return `name` if gpufrag knows it; otherwise raise ValueError listing the known names."""
    if name not in KNOWN_GPU_MODELS:
        known = ", ".join(sorted(KNOWN_GPU_MODELS))
        raise ValueError(f"unknown GPU model {name!r}; known: {known}")
    return name


GpuModel = Annotated[str, AfterValidator(check_gpu_model)]
"""A str field that only accepts known GPU model names."""
