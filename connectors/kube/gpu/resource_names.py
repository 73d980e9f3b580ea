"""GPU resource names and GPU product labels as NVIDIA's device plugin, GPU Feature Discovery
and HAMi spell them, read into gpufrag's units."""

from __future__ import annotations

import re

from models import KNOWN_GPU_MODELS
from models.gpu import GPU_MODEL_MAX_CHARS

__all__ = [
    "GPU",
    "GPU_CORES",
    "GPU_INDICES",
    "GPU_MEMORY",
    "GPU_MEMORY_PCT",
    "GPU_SHARED",
    "HAMI_NODE",
    "LABEL_COUNT",
    "LABEL_MEMORY",
    "LABEL_MIG_STRATEGY",
    "LABEL_PRODUCT",
    "LABEL_REPLICAS",
    "MIG_PREFIX",
    "gpu_model_of",
    "is_gpu_resource",
    "mig_profile",
]

GPU = "nvidia.com/gpu"
GPU_SHARED = "nvidia.com/gpu.shared"
"""Time-slicing replicas when the device plugin renames them (``renameByDefault: true``)."""
GPU_MEMORY = "nvidia.com/gpumem"
"""HAMi: device memory per card, MiB."""
GPU_MEMORY_PCT = "nvidia.com/gpumem-percentage"
"""HAMi: device memory per card as a share of the card, percent (instead of gpumem)."""
GPU_CORES = "nvidia.com/gpucores"
"""HAMi: compute share per card, percent."""
MIG_PREFIX = "nvidia.com/mig-"
"""MIG "mixed" strategy: one resource per profile, e.g. nvidia.com/mig-1g.10gb."""

GPU_INDICES = "gpufrag.io/gpu-indices"
"""Pod annotation: the cards (indices, comma-separated) gpufrag's extender bound a pod's GPU
devices to, as HAMi's scheduler records its choice in an annotation for its device plugin."""
HAMI_NODE = "hami.io/vgpu-node"
"""Pod annotation HAMi's scheduler sets to the node it chose; the extender sets it too."""

LABEL_PRODUCT = "nvidia.com/gpu.product"
LABEL_COUNT = "nvidia.com/gpu.count"
LABEL_MEMORY = "nvidia.com/gpu.memory"
"""Per-card memory in MiB, as GPU Feature Discovery labels it."""
LABEL_REPLICAS = "nvidia.com/gpu.replicas"
LABEL_MIG_STRATEGY = "nvidia.com/mig.strategy"


def mig_profile(resource: str) -> str | None:
    """ "1g.10gb" for "nvidia.com/mig-1g.10gb"; None for any other resource."""
    if resource.startswith(MIG_PREFIX) and len(resource) > len(MIG_PREFIX):
        return resource[len(MIG_PREFIX) :]
    return None


def is_gpu_resource(resource: str) -> bool:
    """Whether a quota on this resource limits GPUs (NVIDIA's, HAMi's, other vendors')."""
    return resource.startswith("nvidia.com/") or "gpu" in resource.lower()


_TOKEN = re.compile(r"[^A-Z0-9.]+")
_SIMPLE = {
    "GB200": "GB200",
    "B200": "B200",
    "H200": "H200",
    "L40S": "L40S",
    "L4": "L4",
    "A10G": "A10G",
    "A30": "A30",
    "A10": "A10",
    "T4": "T4",
    "P100": "P100",
    "P4": "P4",
    "M40": "M40",
    "3090": "3090",
    "2080": "2080",
    "1080": "1080",
}


_VENDOR = frozenset({"NVIDIA", "TESLA"})


def gpu_model_of(product: str, *, memory_mib: int | None = None) -> str | None:
    """gpufrag's model name for a GPU Feature Discovery product label. The families gpufrag
    knows keep their names ("NVIDIA-A100-SXM4-80GB" -> "A100-80GB", "Tesla-T4" -> "T4"), so
    the trace and the published results still match; any other product is a model too, its
    label without the vendor ("NVIDIA-RTX-6000-Ada-Generation" -> "RTX-6000-ADA-GENERATION",
    "NVIDIA-H20" -> "H20"). None only when nothing of a name is left."""
    if product in KNOWN_GPU_MODELS:
        return product
    tokens = [t for t in _TOKEN.split(product.upper()) if t]
    # GFD appends "-SHARED" to a time-sliced card's product, and "-MIG-<profile>" to the
    # product of a node in MIG's single strategy: the card is the same model either way
    if "MIG" in tokens[1:]:
        tokens = tokens[: tokens.index("MIG", 1)]
    while tokens and tokens[-1] == "SHARED":
        tokens = tokens[:-1]
    known = _known_family(tokens, memory_mib)
    if known is not None:
        return known
    while tokens and tokens[0] in _VENDOR:
        tokens = tokens[1:]
    name = "-".join(tokens)[:GPU_MODEL_MAX_CHARS].strip(".-")
    return name or None


def _known_family(tokens: list[str], memory_mib: int | None) -> str | None:
    sizes = {t for t in tokens if t.endswith("GB")}
    for token in tokens:
        if token == "H100":
            return "H100-80GB" if "80GB" in sizes else "H100"
        if token == "A100":
            if "80GB" in sizes or (memory_mib is not None and memory_mib > 60_000):
                return "A100-80GB"
            if "40GB" in sizes or memory_mib is not None:
                return "A100-40GB"
            return "A100"
        if token == "V100":
            if "32GB" in sizes or (memory_mib is not None and memory_mib > 20_000):
                return "V100M32"
            if "16GB" in sizes or memory_mib is not None:
                return "V100M16"
            return "V100"
        if token in _SIMPLE:
            return _SIMPLE[token]
    return None
