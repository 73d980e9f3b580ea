"""A node's schedulable capacity, as allocatable (not capacity) reports it."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from models.base import Frozen
from models.bounds import (
    CpuMilli,
    GpuCount,
    GpuIndex,
    GpuMemoryMib,
    MemoryMib,
    MigCount,
    Replicas,
)
from models.cards import SharingMode, card_slices, mig_profile_slices
from models.gpu import GpuModel

__all__ = ["Node", "Taint", "Toleration"]


class Taint(Frozen):
    """A taint rules a node out for pods without a toleration: one cause of unplaceability."""

    key: Annotated[str, Field(min_length=1)]
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


class Toleration(Frozen):
    """Lets a pod onto a tainted node; without tolerations, a GPU node's taint reads as a block."""

    key: str | None = None
    """None with operator Exists tolerates every taint."""
    operator: Literal["Exists", "Equal"] = "Equal"
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    """None tolerates every effect."""

    def tolerates(self, taint: Taint) -> bool:
        if self.effect is not None and self.effect != taint.effect:
            return False
        if self.key is None:
            return self.operator == "Exists"
        if self.key != taint.key:
            return False
        return self.operator == "Exists" or (self.value or "") == (taint.value or "")


class Node(Frozen):
    """One node. `gpu_model` is the card type of the whole node: clusters are homogeneous per
    node, and the FGD measure needs the model to know which pods could use the free share."""

    name: Annotated[str, Field(min_length=1)]
    cpu_milli: CpuMilli
    memory_mib: MemoryMib
    gpu_model: GpuModel | None = None
    gpu_count: GpuCount = 0
    gpu_memory_mib: GpuMemoryMib | None = None
    """Memory per card."""
    gpu_replicas: Replicas = 1
    """Devices advertised per card: time-slicing replicas, or HAMi's vGPU split count."""
    gpu_shared_resource: bool = False
    """The cards are advertised as ``nvidia.com/gpu.shared`` (renamed replicas)."""
    gpu_dra: bool = Field(default=False, exclude_if=lambda v: not v)
    """The cards are DRA devices (ResourceSlices), not the device plugin's. Left out of the
    JSON when false (as ``card_taints`` when empty): a node outside DRA keeps its event id."""
    card_taints: dict[GpuIndex, str] = Field(default_factory=dict, exclude_if=lambda v: not v)
    """Cards a DRA device taint (``NoSchedule`` or ``NoExecute``, in the slice or a
    DeviceTaintRule) keeps new work off: card number -> ``key=value:Effect``."""
    gpu_sharing: SharingMode | None = None
    """How the whole cards are shared; None: time-sliced when replicas > 1, else milli-GPU
    shares (the trace's cards). The kube mapping always says which."""
    mig_devices: dict[str, MigCount] = Field(default_factory=dict)
    """Free and used MIG instances by profile (the node's ``nvidia.com/mig-<profile>``)."""
    mig_cards: GpuCount = 0
    """Cards split into MIG instances, besides the ``gpu_count`` whole ones; 0: as many as
    the instances need."""
    mig_device_profile: str | None = None
    """MIG's single strategy: every ``nvidia.com/gpu`` the node advertises is an instance of
    this profile, so a pod's ``nvidia.com/gpu: 1`` takes one (its instances are in
    ``mig_devices``)."""
    labels: dict[str, str] = Field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    problems: dict[str, str] = Field(default_factory=dict)
    """Problem conditions that hold (Node Problem Detector's, such as ``KernelDeadlock`` or a
    GPU check's own): condition type -> its reason and message. The kubelet's own conditions
    are not problems here; it taints the node for those itself."""
    pool: str | None = None

    @model_validator(mode="after")
    def _model_matches_count(self) -> Node:
        if self.gpu_count > 0 and self.gpu_model is None:
            raise ValueError(f"gpu_model is required when gpu_count={self.gpu_count} > 0")
        # A MIG-only node may advertise no whole GPUs yet still has a card model.
        slices = card_slices(self.gpu_model)
        if self.mig_device_profile is not None and set(self.mig_devices) - {
            self.mig_device_profile
        }:
            raise ValueError("a node in MIG's single strategy has instances of one profile only")
        for profile in self.mig_devices:
            if mig_profile_slices(profile) > slices:
                raise ValueError(
                    f"MIG profile {profile!r} needs {mig_profile_slices(profile)} compute slices; "
                    f"a {self.gpu_model} card has {slices}"
                )
        if self.gpu_count == 0 and not self.mig_devices and self.gpu_model is not None:
            raise ValueError(
                f"gpu_model={self.gpu_model!r} given but the node has no GPUs (gpu_count=0)"
            )
        return self

    @property
    def sharing(self) -> SharingMode:
        if self.gpu_sharing is not None:
            return self.gpu_sharing
        return SharingMode.TIME_SLICED if self.gpu_replicas > 1 else SharingMode.MILLI
