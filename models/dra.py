"""Dynamic Resource Allocation (``resource.k8s.io/v1``) objects, only the fields gpufrag reads.

DRA describes GPUs as devices in ResourceSlices and hands them to pods through ResourceClaims.
These are edge models: the watchers and ``inspect`` decode the API's JSON into them, and
``connectors/kube/dra/`` turns them into the node and pod models the rest of gpufrag reads,
so one capacity model serves clusters on the device plugin and on DRA alike.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import Field

from models.base import Frozen
from models.bounds import COUNT_MAX, GPU_MEMORY_MIB_MAX

__all__ = [
    "AttributeValue",
    "ClaimRequest",
    "ClaimResult",
    "DeviceClassSpec",
    "DeviceKind",
    "DeviceTaintRuleSpec",
    "DraClaim",
    "DraDevice",
    "DraSlice",
    "DraTaint",
    "MatchAttribute",
]

Name = Annotated[str, Field(min_length=1, max_length=253)]
Amount = Annotated[int, Field(ge=0, le=COUNT_MAX)]
CounterAmount = Annotated[int, Field(ge=0, le=2**63 - 1)]
"""A counter's value: bytes for ``memory``, so past COUNT_MAX (an 80 GiB card is 8.6e10)."""
MemoryMib = Annotated[int, Field(ge=0, le=GPU_MEMORY_MIB_MAX)]
AttributeValue = str | int | bool
"""A device attribute's value; a ``version`` attribute is kept as its text."""


class DeviceKind(StrEnum):
    """What a device is to gpufrag, from the NVIDIA driver's ``type`` attribute."""

    GPU = "gpu"
    MIG = "mig"
    OTHER = "other"
    """Not a GPU (a NIC, a VFIO passthrough device): counted nowhere."""


class DraTaint(Frozen):
    """A device taint; ``None`` only says what would be evicted, the others act like a node's."""

    key: Name
    value: str | None = None
    effect: Literal["None", "NoSchedule", "NoExecute"]


class DraDevice(Frozen):
    name: Name
    kind: DeviceKind
    attributes: dict[str, AttributeValue] = Field(default_factory=dict)
    """Fully qualified names (``gpu.nvidia.com/productName``): what selectors read."""
    memory_mib: MemoryMib | None = None
    """The ``memory`` capacity (bytes in the API)."""
    shared: bool = False
    """``allowMultipleAllocations``: several claims each consume a part of its capacity."""
    counter_set: str | None = None
    """The shared counter set it draws on (one physical GPU for a partitionable device)."""
    counters: dict[str, CounterAmount] = Field(default_factory=dict)
    taints: tuple[DraTaint, ...] = ()

    def attribute(self, driver: str, name: str) -> AttributeValue | None:
        return self.attributes.get(name if "/" in name else f"{driver}/{name}")


class DraSlice(Frozen):
    """One ResourceSlice. A pool may span several; only a complete newest generation counts."""

    name: Name
    driver: Name
    pool: Name
    generation: Amount
    slice_count: Annotated[int, Field(ge=1, le=COUNT_MAX)]
    node: str | None = None
    """``nodeName``; None for slices by node selector or for all nodes (not GPUs of one node)."""
    devices: tuple[DraDevice, ...] = ()
    counter_sets: dict[str, dict[str, CounterAmount]] = Field(default_factory=dict)


class DeviceClassSpec(Frozen):
    name: Name
    selectors: tuple[str, ...] = ()
    """CEL expressions, all of which a device must satisfy."""
    extended_resource_name: str | None = None


class ClaimRequest(Frozen):
    """One request of a claim, or one alternative of a ``firstAvailable`` request."""

    name: Name
    class_name: Name
    selectors: tuple[str, ...] = ()
    all: bool = False
    """``allocationMode: All``: every matching device of one node."""
    count: Annotated[int, Field(ge=1, le=COUNT_MAX)] = 1
    admin_access: bool = False
    """Asks for monitoring access to devices in use: it takes nothing and waits for nothing."""
    memory_mib: MemoryMib | None = None
    """``capacity.requests.memory`` on a shared device."""
    alternatives: tuple[ClaimRequest, ...] = ()
    """``firstAvailable``: the first alternative that can be met is taken."""


class MatchAttribute(Frozen):
    """All devices of the named requests (every request if empty) share this attribute's value."""

    requests: tuple[str, ...] = ()
    attribute: Name


class ClaimResult(Frozen):
    request: Name
    driver: Name
    pool: Name
    device: Name
    share_id: str | None = None
    consumed_memory_mib: MemoryMib | None = None
    admin_access: bool = False
    """Monitoring access: the device is not taken from anyone and counts for no one."""


class DraClaim(Frozen):
    namespace: Name
    name: Name
    uid: str = ""
    requests: tuple[ClaimRequest, ...] = ()
    constraints: tuple[MatchAttribute, ...] = ()
    allocated: bool = False
    results: tuple[ClaimResult, ...] = ()
    node: str | None = None
    """The one node the allocation's selector names; None when unallocated or not node-local."""
    reserved_for: tuple[str, ...] = ()
    """Names of the pods (in the claim's namespace) it is reserved for."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


class DeviceTaintRuleSpec(Frozen):
    """A DeviceTaintRule: the taint on every device its selector matches (unset parts match all)."""

    name: Name
    driver: str | None = None
    pool: str | None = None
    device: str | None = None
    taint: DraTaint

    def matches(self, driver: str, pool: str, device: str) -> bool:
        return (
            (self.driver is None or self.driver == driver)
            and (self.pool is None or self.pool == pool)
            and (self.device is None or self.device == device)
        )
