"""GPU model names: an open set in one spelling, with the families gpufrag knows by name.

A closed list used to reject every node with a card it had not heard of (an H20, an L40), so
those nodes never reached the profiles; a name is now checked for its shape only."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator

__all__ = [
    "GPU_MODEL_MAX_CHARS",
    "KNOWN_GPU_MODELS",
    "MILLI_PER_GPU",
    "GpuModel",
    "check_gpu_model",
]

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
"""The families gpufrag has settled names for (what the trace and the published results use,
and what product labels of those cards map to). Not a gate: any well-formed name is a model."""

GPU_MODEL_MAX_CHARS = 64
_MODEL_NAME = re.compile(r"[A-Z0-9][A-Z0-9._-]*")


def check_gpu_model(name: str) -> str:
    """The model name in its one spelling (upper case: "h200" and "H200" are one card), or
    ValueError for what cannot be a name. Any other name is a model: a new card (an H20, an
    RTX 6000 Ada) must reach the profiles, not be dropped for not being on a list."""
    text = name.strip().upper()
    if not text or len(text) > GPU_MODEL_MAX_CHARS or not _MODEL_NAME.fullmatch(text):
        raise ValueError(
            f"{name[:80]!r} is not a GPU model name: letters, digits, '.', '_' or '-', starting "
            f"with a letter or digit, at most {GPU_MODEL_MAX_CHARS} characters"
        )
    return text


GpuModel = Annotated[str, AfterValidator(check_gpu_model)]
"""A GPU model name, normalised (see check_gpu_model)."""
