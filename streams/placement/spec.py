"""Plain, hashable descriptions of nodes and pods for the simulator's hot path."""

from __future__ import annotations

from dataclasses import dataclass

from streams.fragmentation.shapes import PodShape


@dataclass(frozen=True, slots=True)
class NodeSpec:
    name: str
    cpu_milli: int
    memory_mib: int
    gpu_count: int
    gpu_model: str | None


@dataclass(frozen=True, slots=True)
class PodSpec:
    name: str
    shape: PodShape
    memory_mib: int

    @property
    def cpu_milli(self) -> int:
        return self.shape.cpu_milli

    @property
    def total_gpu_milli(self) -> int:
        return self.shape.total_gpu_milli
