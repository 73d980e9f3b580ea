"""Which card holds what, in the node's sharing mode: the pods bound to a node laid on its cards.

Pods whose devices are known (``gpu_indices``) are charged to those cards. The others (a
watcher rarely sees device ids) are laid the way the device plugins hand devices out, in a
fixed order, so the layout is a pure function of the set of bound pods: an incremental update
and a recomputation from scratch agree by construction.

What one device of a request takes depends on the card, not the pod: a whole card on an
exclusive card, one replica on a time-sliced card, its core share and memory cap on a HAMi
card, its milli-GPU share on the trace's cards. MIG instances are asked for by profile.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from models import MILLI_PER_GPU, Node, ResourceRequest
from models.cards import SharingMode, card_slices, mig_profile_slices

__all__ = ["CardLayout", "LaidCard", "lay_cards", "mig_layout"]

Bound = tuple[str, ResourceRequest, tuple[int, ...]]
"""(pod key, request, known device indices) of a pod holding resources on the node."""


@dataclass(slots=True)
class LaidCard:
    index: int
    mode: SharingMode
    units: int
    free: int
    """Free in the mode's units (milli, replicas, MIG slices, HAMi core milli)."""
    slots_free: int = 0
    """HAMi: vGPUs still to hand out."""
    memory_total_mib: int | None = None
    memory_free_mib: int | None = None
    mig_free: dict[str, int] = field(default_factory=dict)
    mig_used: dict[str, int] = field(default_factory=dict)
    pods: list[str] = field(default_factory=list)

    @property
    def milli_free(self) -> int:
        """What can still be handed out, in 1/1000 of a card."""
        if self.mode is SharingMode.MIG:
            slices = sum(n * mig_profile_slices(p) for p, n in self.mig_free.items())
            return round(slices * MILLI_PER_GPU / self.units)
        if self.mode is SharingMode.HAMI:
            if self.slots_free == 0:
                return 0
            share = self.free
            if self.memory_free_mib is not None and self.memory_total_mib:
                share = min(share, self.memory_free_mib * MILLI_PER_GPU // self.memory_total_mib)
            return share
        return round(self.free * MILLI_PER_GPU / self.units)


@dataclass(frozen=True, slots=True)
class CardLayout:
    cards: tuple[LaidCard, ...]
    unplaced: int
    """Devices or instances bound pods hold that no card had room for (an overcommitted
    node, or labels that undercount its cards)."""


def mig_layout(node: Node) -> list[LaidCard]:
    """The node's MIG instances laid on cards, largest profiles first. The node reports
    instances per profile, not per card. When GFD's count says how many cards there are,
    each profile's instances go round the cards, as NVIDIA's mig-parted configurations
    repeat one layout per card (``all-balanced``: 1x3g, 1x2g and 2x1g on every A100);
    otherwise onto as few cards as hold them. Never more on a card than it has slices."""
    slices = card_slices(node.gpu_model)
    cards = [
        LaidCard(node.gpu_count + i, SharingMode.MIG, slices, slices) for i in range(node.mig_cards)
    ]
    wanted = sorted(node.mig_devices.items(), key=lambda pn: (-mig_profile_slices(pn[0]), pn[0]))
    for profile, count in wanted:
        size = mig_profile_slices(profile)
        for k in range(count):
            turn = cards[k % len(cards) :] + cards[: k % len(cards)] if cards else []
            card = next((c for c in turn if c.free >= size), None)
            if card is None:
                card = LaidCard(node.gpu_count + len(cards), SharingMode.MIG, slices, slices)
                cards.append(card)
            card.free -= size
            card.mig_free[profile] = card.mig_free.get(profile, 0) + 1
    for card in cards:
        card.free = slices  # instances are carved out but free until a pod holds one
    return cards


def _whole_cards(node: Node) -> list[LaidCard]:
    mode = node.sharing
    out = []
    for i in range(node.gpu_count):
        if mode is SharingMode.TIME_SLICED:
            out.append(LaidCard(i, mode, node.gpu_replicas, node.gpu_replicas))
        elif mode is SharingMode.HAMI:
            mem = node.gpu_memory_mib
            out.append(LaidCard(i, mode, MILLI_PER_GPU, MILLI_PER_GPU, node.gpu_replicas, mem, mem))
        else:
            out.append(LaidCard(i, mode, MILLI_PER_GPU, MILLI_PER_GPU))
    return out


def device_need(mode: SharingMode, req: ResourceRequest) -> int:
    """What one device of ``req`` takes of a card in ``mode``, in the mode's units."""
    if mode is SharingMode.TIME_SLICED:
        return 1
    if mode is SharingMode.EXCLUSIVE:
        return MILLI_PER_GPU
    if mode is SharingMode.HAMI:
        # HAMi reserves no cores for a vGPU that does not set gpucores (its defaultCores 0)
        return 0 if req.gpu_cores_pct is None else req.gpu_cores_pct * MILLI_PER_GPU // 100
    return req.gpu_milli


def _memory_need(card: LaidCard, req: ResourceRequest) -> int:
    # HAMi gives a vGPU without gpumem the whole card's memory (its defaultMem, 100 %)
    if req.gpu_memory_mib is not None:
        return req.gpu_memory_mib
    total = card.memory_total_mib or 0
    return total if req.gpu_memory_pct is None else total * req.gpu_memory_pct // 100


def _room(card: LaidCard, need: int, req: ResourceRequest) -> bool:
    if card.free < need:
        return False
    if card.mode is SharingMode.HAMI:
        if card.slots_free < 1:
            return False
        if card.memory_free_mib is not None and card.memory_free_mib < _memory_need(card, req):
            return False
    return True


def _take(card: LaidCard, need: int, req: ResourceRequest, key: str) -> int:
    """Charge one device to the card; returns the part of it that found no room."""
    took = min(card.free, need)
    card.free -= took
    if card.mode is SharingMode.HAMI:
        card.slots_free = max(0, card.slots_free - 1)
        if card.memory_free_mib is not None:
            card.memory_free_mib = max(0, card.memory_free_mib - _memory_need(card, req))
    if key not in card.pods:
        card.pods.append(key)
    return need - took


def _tightest(card: LaidCard) -> tuple[int, int, int]:
    # the card with the least room that still fits: shares pack, whole cards stay whole
    return (card.free, card.memory_free_mib or 0, card.index)


def _lay_devices(cards: list[LaidCard], bound: Iterable[Bound]) -> int:
    unplaced = 0
    later: list[tuple[str, ResourceRequest]] = []
    for key, req, indices in bound:
        if req.gpu_count == 0 or not cards:
            unplaced += req.gpu_count if not cards else 0
            continue
        if len(indices) == req.gpu_count and all(0 <= i < len(cards) for i in indices):
            for i in indices:
                short = _take(cards[i], device_need(cards[i].mode, req), req, key)
                unplaced += 1 if short else 0
        else:
            later.append((key, req))
    # largest shares first, then by key: whole cards take the lowest free indices and shares
    # the tightest card with room, as the device plugins hand them out
    later.sort(key=lambda kr: (-kr[1].gpu_milli, -kr[1].gpu_count, kr[0]))
    for key, req in later:
        for _ in range(req.gpu_count):
            need = device_need(cards[0].mode, req)
            fitting = [c for c in cards if _room(c, need, req)]
            if not fitting:
                unplaced += 1
                continue
            _take(min(fitting, key=_tightest), need, req, key)
    return unplaced


def _lay_instances(cards: list[LaidCard], bound: Iterable[Bound]) -> int:
    unplaced = 0
    for key, req, _ in sorted(bound, key=lambda b: b[0]):
        for profile, count in sorted(req.mig.items()):
            for _ in range(count):
                card = next((c for c in cards if c.mig_free.get(profile, 0) > 0), None)
                if card is None:
                    unplaced += 1
                    continue
                card.mig_free[profile] -= 1
                card.mig_used[profile] = card.mig_used.get(profile, 0) + 1
                card.free -= mig_profile_slices(profile)
                if key not in card.pods:
                    card.pods.append(key)
    return unplaced


def as_instances(req: ResourceRequest, profile: str) -> ResourceRequest:
    """A whole-GPU request on a node in MIG's single strategy: that many instances of its one
    profile (HAMi's limits do not apply to MIG instances)."""
    if req.gpu_count == 0:
        return req
    mig = dict(req.mig)
    mig[profile] = mig.get(profile, 0) + req.gpu_count
    return req.model_copy(
        update={
            "gpu_count": 0,
            "gpu_milli": 0,
            "mig": mig,
            "gpu_memory_mib": None,
            "gpu_memory_pct": None,
            "gpu_cores_pct": None,
        }
    )


def lay_cards(node: Node, bound: Sequence[Bound]) -> CardLayout:
    """The node's cards with the bound pods laid on them."""
    if node.mig_device_profile is not None:
        profile = node.mig_device_profile
        bound = [(k, as_instances(r, profile), ix) for k, r, ix in bound]
    whole = _whole_cards(node)
    mig = mig_layout(node) if node.mig_devices or node.mig_cards else []
    unplaced = _lay_devices(whole, bound) + _lay_instances(mig, bound)
    for card in whole + mig:
        card.pods.sort()
    return CardLayout(cards=tuple(whole + mig), unplaced=unplaced)
