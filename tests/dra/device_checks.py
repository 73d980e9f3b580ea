"""What the claims' allocations say each DRA device holds, read straight from the objects
(not through gpufrag's card code), and the check that node profiles count the same."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

from connectors.kube.dra.device_book import DraBook
from models import MILLI_PER_GPU, NodeProfile
from models.cards import SharingMode

__all__ = ["Allocated", "allocated", "check_profiles"]


@dataclass(slots=True)
class Allocated:
    """Per node: full GPUs held (by uuid), memory consumed per shared GPU, MIG shapes held."""

    whole: set[str] = field(default_factory=set)
    shared_mib: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    shared_total_mib: dict[str, int] = field(default_factory=dict)
    mig: Counter[str] = field(default_factory=Counter)
    gpus: int = 0
    """Physical GPUs the node's slices list."""


def allocated(book: DraBook) -> dict[str, Allocated]:
    devices = {}
    out: dict[str, Allocated] = defaultdict(Allocated)
    for node, listed in book.devices_by_node().items():
        for d in listed:
            devices[d.key] = (node, d.device)
            if d.device.kind.value == "gpu":
                out[node].gpus += 1
                if d.device.shared:
                    out[node].shared_total_mib[d.device.name] = d.device.memory_mib or 0
    for claim in book.claims.values():
        for r in claim.results:
            found = devices.get((r.driver, r.pool, r.device))
            if found is None:
                continue
            node, device = found
            if device.kind.value == "mig":
                out[node].mig[str(device.attributes[f"{r.driver}/profile"])] += 1
            elif device.shared:
                out[node].shared_mib[device.name] += r.consumed_memory_mib or 0
            else:
                out[node].whole.add(device.name)
    return dict(out)


def check_profiles(book: DraBook, profiles: dict[str, NodeProfile]) -> int:
    """Asserts every node's profile counts what the allocations say; returns devices checked."""
    checked = 0
    for node, want in sorted(allocated(book).items()):
        profile = profiles[node]
        mig_cards = [g for g in profile.gpus if g.mode is SharingMode.MIG]
        other = [g for g in profile.gpus if g.mode is not SharingMode.MIG]
        # whole and shared cards: one per listed full GPU that is not cut into MIG shapes
        assert len(other) + len(mig_cards) == want.gpus, (node, profile.gpus)
        used_whole = [g for g in other if g.mode is SharingMode.EXCLUSIVE and g.milli_free == 0]
        free_whole = [
            g for g in other if g.mode is SharingMode.EXCLUSIVE and g.milli_free == MILLI_PER_GPU
        ]
        assert len(used_whole) == len(want.whole), (node, want.whole, profile.gpus)
        exclusive = [g for g in other if g.mode is SharingMode.EXCLUSIVE]
        assert len(used_whole) + len(free_whole) == len(exclusive), (node, profile.gpus)
        shared = [g for g in other if g.mode is SharingMode.HAMI]
        assert len(shared) == len(want.shared_total_mib), (node, profile.gpus)
        for g, (name, total) in zip(shared, sorted(want.shared_total_mib.items()), strict=True):
            assert g.memory_free_mib == total - want.shared_mib.get(name, 0), (node, name, g)
        used_mig: Counter[str] = Counter()
        for g in mig_cards:
            used_mig.update(g.mig_used)
        assert used_mig == want.mig, (node, used_mig, want.mig)
        checked += len(profile.gpus)
    return checked
