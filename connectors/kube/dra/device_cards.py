"""A node's DRA devices as cards: the unit the rest of gpufrag counts.

The NVIDIA driver lists a partitionable GPU twice over: the full GPU and every MIG shape it
could be cut into, all drawing on one counter set. Summing them would count one H100 as eight
GPUs. So devices are grouped by physical card (the full GPU's ``uuid`` and its partitions'
``parentUUID``, or their common counter set) and each card is read in one mode:

- a partition is allocated: a MIG card, its allocated partitions used and, as free, the
  largest partitions that still fit the counters left (greedy, largest first, the way the
  device plugin's mixed layouts are carved);
- only MIG devices are published (MIG made ahead, no counters): a MIG card of those;
- the full GPU can be shared (``allowMultipleAllocations``): a shared card whose used memory
  is the sum of the claims' ``consumedCapacity``;
- otherwise a whole card, used when a claim holds the full GPU.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from connectors.kube.dra.device_book import DeviceKey, DraBook, Holding, NodeDevice
from connectors.kube.gpu.resource_names import gpu_model_of
from models.cards import mig_profile_slices
from models.dra import DeviceKind, DeviceTaintRuleSpec

__all__ = ["CardMode", "DraCard", "by_device", "cards_for", "models_of", "node_cards"]

_MINOR = re.compile(r"gpu-(\d+)")

CardMode = str
"""``whole``, ``shared`` or ``mig``."""


@dataclass(slots=True)
class DraCard:
    minor: int
    model: str | None
    mode: CardMode
    memory_mib: int | None
    full: DeviceKey | None = None
    """The full GPU's device, where it is listed."""
    uuid: str | None = None
    holders: list[Holding] = field(default_factory=list)
    """Claims holding the full GPU (several on a shared card)."""
    mig_used: Counter[str] = field(default_factory=Counter)
    mig_free: Counter[str] = field(default_factory=Counter)
    partitions: dict[DeviceKey, str] = field(default_factory=dict)
    """Every partition device of the card -> its MIG profile."""
    taint: str | None = None
    """A taint (the slice's own, or a DeviceTaintRule's) that keeps new work off the full
    GPU: ``key=value:Effect``. ``None``-effect taints only show what would be evicted."""
    position: int = 0
    """The card's number in the node's profile: whole and shared cards first, by minor, then
    the MIG cards (the order the node's card layout numbers them)."""


def _minor(name: str, fallback: int) -> int:
    match = _MINOR.match(name)
    return int(match.group(1)) if match else fallback


def _profile(d: NodeDevice) -> str | None:
    value = d.device.attribute(d.driver, "profile")
    if not isinstance(value, str):
        return None
    try:
        mig_profile_slices(value)
    except ValueError:
        return None
    return value


def _model(d: NodeDevice) -> str | None:
    product = d.device.attribute(d.driver, "productName")
    if not isinstance(product, str):
        return None
    return gpu_model_of(product)


def _group(devices: list[NodeDevice]) -> list[list[NodeDevice]]:
    """Devices by physical card, in listing order of each card's first device."""
    groups: dict[str, list[NodeDevice]] = {}
    by_set: dict[tuple[str, str, str], str] = {}
    for d in devices:
        if d.device.kind is DeviceKind.GPU:
            uuid = d.device.attribute(d.driver, "uuid")
            gid = (
                f"uuid:{uuid}"
                if isinstance(uuid, str)
                else f"dev:{d.driver}/{d.pool}/{d.device.name}"
            )
            groups.setdefault(gid, []).append(d)
            if d.device.counter_set:
                by_set[(d.driver, d.pool, d.device.counter_set)] = gid
    for d in devices:
        if d.device.kind is not DeviceKind.MIG:
            continue
        parent = d.device.attribute(d.driver, "parentUUID")
        by_parent = f"uuid:{parent}" if isinstance(parent, str) else None
        gid = by_parent or f"set:{d.driver}/{d.pool}/{d.device.counter_set}"
        if by_parent not in groups:
            gid = by_set.get((d.driver, d.pool, d.device.counter_set or ""), gid)
        groups.setdefault(gid, []).append(d)
    return list(groups.values())


def _carve(partitions: list[NodeDevice], held: set[DeviceKey], card: DraCard) -> None:
    """Used partitions, and the free ones that still fit what their counters have left."""
    left: dict[str, int] | None = None
    first = partitions[0]
    counter_set = first.device.counter_set
    if counter_set is not None:
        # shapes that draw on a set the pool does not list overlap in ways nothing here can
        # tell: none of them counts as free (counting each would add up to more than a card)
        left = dict(first.counter_sets.get(counter_set, {}))
    for d in partitions:
        profile = card.partitions[d.key]
        if d.key in held:
            card.mig_used[profile] += 1
            if left is not None:
                for name, amount in d.device.counters.items():
                    left[name] = left.get(name, 0) - amount
    order = sorted(
        (d for d in partitions if d.key not in held),
        key=lambda d: (-mig_profile_slices(card.partitions[d.key]), d.device.name),
    )
    for d in order:
        if left is not None:
            if any(left.get(n, 0) < a for n, a in d.device.counters.items()):
                continue
            for name, amount in d.device.counters.items():
                left[name] -= amount
        card.mig_free[card.partitions[d.key]] += 1


def _taint(d: NodeDevice, rules: Iterable[DeviceTaintRuleSpec]) -> str | None:
    taints = [*d.device.taints, *(r.taint for r in rules if r.matches(*d.key))]
    for t in taints:
        if t.effect != "None":
            return f"{t.key}={t.value or ''}:{t.effect}"
    return None


def _card(
    members: list[NodeDevice],
    holdings: dict[DeviceKey, list[Holding]],
    rules: Iterable[DeviceTaintRuleSpec],
    i: int,
) -> DraCard:
    full = next((d for d in members if d.device.kind is DeviceKind.GPU), None)
    parts = [d for d in members if d.device.kind is DeviceKind.MIG and _profile(d) is not None]
    named = full or members[0]
    uuid = full.device.attribute(full.driver, "uuid") if full else None
    card = DraCard(
        minor=_minor(named.device.name, i),
        model=next((m for d in members if (m := _model(d)) is not None), None),
        mode="whole",
        memory_mib=named.device.memory_mib,
        full=full.key if full else None,
        uuid=uuid if isinstance(uuid, str) else None,
        partitions={d.key: p for d in parts if (p := _profile(d)) is not None},
        taint=_taint(full, rules) if full else None,
    )
    held = {d.key for d in parts if holdings.get(d.key)}
    if full is not None:
        card.holders = list(holdings.get(full.key, []))
    if held or (full is None and parts):
        card.mode = "mig"
        _carve(parts, held, card)
    elif full is not None and full.device.shared:
        card.mode = "shared"
    return card


def node_cards(
    devices: list[NodeDevice],
    holdings: dict[DeviceKey, list[Holding]],
    rules: Iterable[DeviceTaintRuleSpec] = (),
) -> list[DraCard]:
    """The node's GPU cards, numbered as its profile numbers them."""
    gpus = [d for d in devices if d.device.kind is not DeviceKind.OTHER]
    rules = list(rules)
    cards = [_card(g, holdings, rules, i) for i, g in enumerate(_group(gpus))]
    cards.sort(key=lambda c: (c.mode == "mig", c.minor))
    for position, card in enumerate(cards):
        card.position = position
    return cards


def models_of(cards: list[DraCard]) -> Counter[str]:
    return Counter(c.model for c in cards if c.model is not None)


def by_device(cards: list[DraCard]) -> dict[DeviceKey, tuple[DraCard, str | None]]:
    """Each device of the node -> its card and, for a partition, its MIG profile."""
    out: dict[DeviceKey, tuple[DraCard, str | None]] = {}
    for card in cards:
        if card.full is not None:
            out[card.full] = (card, None)
        for key, profile in card.partitions.items():
            out[key] = (card, profile)
    return out


def cards_for(book: DraBook, node: str) -> list[DraCard]:
    """The node's cards as the book stands now."""
    devices = book.node_devices(node)
    if not devices:
        return []
    return node_cards(devices, book.holdings(node), book.rules.values())
