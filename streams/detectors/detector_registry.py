"""The detectors the cluster operator hosts, in the order they hear of each change.

The product's detectors register here the same way an extension does in its own module
(``DETECTORS.register(MyDetector.name, MyDetector)``, imported through ``GPUFRAG_PLUGINS``):
a name, its class, and registration order as hearing order. An extension comes after the
built-ins, so it can read what they opened for the same change (``Detector.on_signals``).
"""

from __future__ import annotations

from typing import Any

from models.component_registry import Registry
from streams.detectors.detector import Detector
from streams.detectors.fragmentation import ClusterFragmentationDetector
from streams.detectors.gpu_health import GpuHealth
from streams.detectors.idle_gpu import IdleGpu
from streams.detectors.memory_limit import NearMemoryLimit
from streams.detectors.oom_storm import OomStorm
from streams.detectors.quota import QuotaDetector
from streams.detectors.stranded import StrandedGpus
from streams.detectors.unplaceable import UnplaceablePending

__all__ = ["DETECTORS"]

DETECTORS: Registry[type[Detector[Any]]] = Registry("detector")

DETECTORS.register(StrandedGpus.name, StrandedGpus)
DETECTORS.register(ClusterFragmentationDetector.name, ClusterFragmentationDetector)
DETECTORS.register(UnplaceablePending.name, UnplaceablePending)
DETECTORS.register(NearMemoryLimit.name, NearMemoryLimit)
DETECTORS.register(OomStorm.name, OomStorm)
DETECTORS.register(GpuHealth.name, GpuHealth)
DETECTORS.register(IdleGpu.name, IdleGpu)
DETECTORS.register(QuotaDetector.name, QuotaDetector)
