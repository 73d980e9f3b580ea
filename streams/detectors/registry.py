"""The detectors the cluster operator hosts, in the order they hear of each change."""

from __future__ import annotations

from typing import Any

from streams.detectors.detector import Detector
from streams.detectors.fragmentation import ClusterFragmentationDetector
from streams.detectors.gpu_health import GpuHealth
from streams.detectors.idle_gpu import IdleGpu
from streams.detectors.memory_limit import NearMemoryLimit
from streams.detectors.oom_storm import OomStorm
from streams.detectors.quota import QuotaDetector
from streams.detectors.stranded import StrandedGpus
from streams.detectors.unplaceable import UnplaceablePending

DETECTORS: tuple[type[Detector[Any]], ...] = (
    StrandedGpus,
    ClusterFragmentationDetector,
    UnplaceablePending,
    NearMemoryLimit,
    OomStorm,
    GpuHealth,
    IdleGpu,
    QuotaDetector,
)
