"""HAMi's device registration on a node: how many vGPUs each card is split into and its memory.

HAMi's device plugin keeps the card list in the ``hami.io/node-nvidia-register`` annotation,
because the device plugin API has no place for memory and core figures. Older releases write
``uuid,split,memoryMiB,cores,type,numa,healthy`` entries joined by ``:``; newer ones a JSON
list of objects with ``id``, ``count``, ``devmem``, ``devcore``, ``type`` and ``health``.
"""

from __future__ import annotations

from dataclasses import dataclass

import orjson

from connectors.kube.objects import MappingError
from models.bounds import GPU_MEMORY_MIB_MAX, REPLICAS_MAX

__all__ = ["HAMI_REGISTER", "HamiCards", "hami_cards"]

HAMI_REGISTER = "hami.io/node-nvidia-register"


@dataclass(frozen=True, slots=True)
class HamiCards:
    count: int
    split: int
    """vGPUs per card (the smallest over the cards: the node's allocatable is that many each)."""
    memory_mib: int | None
    """Memory per card (the smallest over the cards)."""
    product: str | None
    """The first card's type as HAMi registered it ("NVIDIA-Tesla V100-PCIE-32GB")."""


def _entries(raw: str) -> list[tuple[str, str, str]]:
    """(split count, memory MiB, card type) of each registered card."""
    text = raw.strip()
    if text.startswith("["):
        try:
            items = orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            raise MappingError(f"annotation {HAMI_REGISTER} is not JSON: {exc}") from None
        if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
            raise MappingError(f"annotation {HAMI_REGISTER} is not a list of devices")
        return [
            (str(i.get("count", "")), str(i.get("devmem", "")), str(i.get("type", "")))
            for i in items
        ]
    out = []
    for entry in text.split(":"):
        if not entry.strip():
            continue
        fields = entry.split(",")
        if len(fields) < 3:
            raise MappingError(
                f"annotation {HAMI_REGISTER}: {entry[:80]!r} is not 'uuid,split,memory,...'"
            )
        out.append((fields[1], fields[2], fields[4] if len(fields) > 4 else ""))
    return out


def _number(text: str, what: str, high: int) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise MappingError(
            f"annotation {HAMI_REGISTER}: {what} {text[:20]!r} is not a number"
        ) from None
    if not 0 <= value <= high:
        raise MappingError(f"annotation {HAMI_REGISTER}: {what} {value} is outside 0..{high}")
    return value


def hami_cards(raw: str | None) -> HamiCards | None:
    """The node's HAMi cards, None when HAMi does not manage it; MappingError for an
    annotation that says nothing readable."""
    if raw is None:
        return None
    entries = _entries(raw)
    if not entries:
        return None
    splits = [_number(split, "split count", REPLICAS_MAX) for split, _, _ in entries]
    memory = [_number(mem, "memory", GPU_MEMORY_MIB_MAX) for _, mem, _ in entries]
    split = min(splits)
    if split < 1:
        raise MappingError(f"annotation {HAMI_REGISTER}: a card is split into 0 vGPUs")
    product = entries[0][2].strip() or None
    return HamiCards(
        count=len(entries), split=split, memory_mib=min(memory) or None, product=product
    )
