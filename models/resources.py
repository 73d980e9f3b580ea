"""What a pod asks for, in the units the schedulers and the FGD measure use."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, field_validator, model_validator

from models.base import Resident
from models.bounds import CpuMilli, GpuCount, GpuMemoryMib, MemoryMib, MigCount
from models.cards import mig_profile_slices
from models.gpu import MILLI_PER_GPU

__all__ = ["ResourceRequest"]


class ResourceRequest(Resident):
    """GPU demand is `gpu_count` cards at `gpu_milli` each: whole cards use 1000, a shared
    request is one card with less. Keeping both numbers (not just a total) is what lets the
    fragmentation measure tell a 0.5-card notebook from half of a 1-card job."""

    cpu_milli: CpuMilli
    memory_mib: MemoryMib
    gpu_count: GpuCount = 0
    gpu_milli: Annotated[int, Field(ge=0, le=MILLI_PER_GPU)] = 0
    mig: dict[str, MigCount] = Field(default_factory=dict)
    """MIG profile (e.g. "1g.10gb") -> count; independent of gpu_count."""
    gpu_memory_mib: GpuMemoryMib | None = None
    """HAMi `nvidia.com/gpumem`: memory cap per card."""
    gpu_memory_pct: Annotated[int, Field(ge=1, le=100)] | None = None
    """HAMi `nvidia.com/gpumem-percentage`: the cap as a share of the card (when no gpumem)."""
    gpu_cores_pct: Annotated[int, Field(ge=0, le=100)] | None = None
    """HAMi `nvidia.com/gpucores`: compute share per card."""
    gpu_shared_resource: bool = False
    """The cards are asked for as ``nvidia.com/gpu.shared`` (time-slicing replicas renamed by
    the device plugin): only nodes advertising that name serve them, and the others only
    nodes advertising ``nvidia.com/gpu``."""
    gpu_dra: bool = Field(default=False, exclude_if=lambda v: not v)
    """The cards are asked for through ResourceClaims (DRA): only nodes whose GPUs are DRA
    devices serve them, and those serve no device-plugin request. Left out of the JSON when
    false, so an event of a pod outside DRA keeps the bytes, and the id, it had before."""

    @field_validator("mig")
    @classmethod
    def _known_profiles(cls, value: dict[str, int]) -> dict[str, int]:
        # A profile no card has ("8g.80gb": 8 of 7 slices) used to pass here and fail later
        # inside the core, costing the whole instant's signals instead of this one pod.
        for profile in value:
            mig_profile_slices(profile)
        return value

    @model_validator(mode="after")
    def _consistent_gpu_share(self) -> ResourceRequest:
        if (self.gpu_milli == 0) != (self.gpu_count == 0):
            raise ValueError(
                f"gpu_milli={self.gpu_milli} inconsistent with gpu_count={self.gpu_count}: "
                "gpu_milli must be 0 exactly when gpu_count is 0"
            )
        if 0 < self.gpu_milli < MILLI_PER_GPU and self.gpu_count != 1:
            raise ValueError(
                f"gpu_milli={self.gpu_milli} (a shared card) requires gpu_count=1, "
                f"got gpu_count={self.gpu_count}"
            )
        if self.gpu_count == 0 and (
            self.gpu_memory_mib is not None
            or self.gpu_memory_pct is not None
            or self.gpu_cores_pct is not None
        ):
            raise ValueError(
                "gpu_memory_mib/gpu_memory_pct/gpu_cores_pct limit a card, so need gpu_count > 0"
            )
        return self

    @property
    def is_hami(self) -> bool:
        """Asks for HAMi's per-card limits: only HAMi's scheduler places it, on its cards."""
        return (
            self.gpu_memory_mib is not None
            or self.gpu_memory_pct is not None
            or self.gpu_cores_pct is not None
        )

    @property
    def total_gpu_milli(self) -> int:
        """GPU demand in milli-cards, the unit of 'arrived' load in the FGD protocol."""
        return self.gpu_count * self.gpu_milli

    @property
    def is_shared_gpu(self) -> bool:
        """True for a fraction of one card: such pods are what strand partial GPUs."""
        return 0 < self.gpu_milli < MILLI_PER_GPU
