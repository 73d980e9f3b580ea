"""What the DRA objects say together: complete pools, the devices of each node, and who holds
which device. No I/O and no clock: the watchers feed it object by object and ``inspect`` from
a snapshot, and both read the same cards out of it.

A pool may span several ResourceSlices (counters in one, devices in another: the API server
refuses both in one slice). Only the newest generation of a pool counts, and only once all of
its ``resourceSliceCount`` slices are seen: a half-published pool would show a node with
fewer GPUs than it has, and every claim on the rest as unplaceable.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from models.dra import (
    DeviceClassSpec,
    DeviceTaintRuleSpec,
    DraClaim,
    DraDevice,
    DraSlice,
)

__all__ = ["DeviceKey", "DraBook", "Holding", "NodeDevice"]

DeviceKey = tuple[str, str, str]
"""(driver, pool, device name): how a claim's result names a device."""


@dataclass(frozen=True, slots=True)
class NodeDevice:
    driver: str
    pool: str
    device: DraDevice
    counter_sets: dict[str, dict[str, int]]
    """The pool's shared counters, for partitionable devices."""

    @property
    def key(self) -> DeviceKey:
        return (self.driver, self.pool, self.device.name)


@dataclass(frozen=True, slots=True)
class Holding:
    claim: str
    """The claim's "namespace/name"."""
    memory_mib: int | None
    """Consumed memory on a shared device; None: the device is held whole."""


@dataclass(slots=True)
class DraBook:
    slices: dict[str, DraSlice] = field(default_factory=dict)
    classes: dict[str, DeviceClassSpec] = field(default_factory=dict)
    claims: dict[str, DraClaim] = field(default_factory=dict)
    """By "namespace/name"."""
    templates: dict[str, DraClaim] = field(default_factory=dict)
    rules: dict[str, DeviceTaintRuleSpec] = field(default_factory=dict)
    _pools: dict[str, list[NodeDevice]] | None = None
    """Devices by node, from complete pools; rebuilt after a slice changes."""
    _nodes: dict[DeviceKey, str] | None = None
    matched: dict[tuple[str, ...], tuple[list[NodeDevice], bool, str | None]] = field(
        default_factory=dict
    )
    """The GPUs each set of selectors matches, whether it matches other devices, and the
    expression it could not read: a
    slice's change asks every pending claim again, and one pass over a large cluster's
    devices per claim would be paid per pod. Emptied when a slice or class changes."""

    def put_slice(self, item: DraSlice | None, *, name: str) -> None:
        if item is None:
            self.slices.pop(name, None)
        else:
            self.slices[name] = item
        self._pools = None
        self._nodes = None
        self.matched.clear()

    def devices_by_node(self) -> dict[str, list[NodeDevice]]:
        if self._pools is None:
            self._pools = _assemble(self.slices.values())
        return self._pools

    def node_of(self, key: DeviceKey) -> str | None:
        if self._nodes is None:
            self._nodes = {d.key: n for n, ds in self.devices_by_node().items() for d in ds}
        return self._nodes.get(key)

    def node_devices(self, node: str) -> list[NodeDevice]:
        return self.devices_by_node().get(node, [])

    def all_devices(self) -> list[NodeDevice]:
        return [d for devices in self.devices_by_node().values() for d in devices]

    def holdings(self, node: str) -> dict[DeviceKey, list[Holding]]:
        """Who holds each device of the node, by the claims' allocations."""
        out: dict[DeviceKey, list[Holding]] = defaultdict(list)
        for claim in self.claims.values():
            if not claim.allocated or claim.node != node:
                continue
            for r in claim.results:
                if r.admin_access:
                    continue
                out[(r.driver, r.pool, r.device)].append(
                    Holding(claim=claim.key, memory_mib=r.consumed_memory_mib)
                )
        return out


def _assemble(slices: object) -> dict[str, list[NodeDevice]]:
    pools: dict[tuple[str, str], list[DraSlice]] = defaultdict(list)
    for s in slices:  # type: ignore[attr-defined]
        pools[(s.driver, s.pool)].append(s)
    out: dict[str, list[NodeDevice]] = defaultdict(list)
    for (driver, pool), members in sorted(pools.items()):
        newest = max(s.generation for s in members)
        current = [s for s in members if s.generation == newest]
        if len(current) < max(s.slice_count for s in current):
            continue  # still being published: counted once whole
        counters: dict[str, dict[str, int]] = {}
        for s in current:
            counters.update(s.counter_sets)
        for s in sorted(current, key=lambda s: s.name):
            if s.node is None:
                continue  # network-attached devices belong to no one node's cards
            for d in s.devices:
                out[s.node].append(NodeDevice(driver, pool, d, counters))
    return dict(out)
