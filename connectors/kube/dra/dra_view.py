"""The DRA book with the node and pod overlays over it, and each node's cards kept until the
next change: a claim's event restates every pod that uses it, and each of those reads the
cards of its node."""

from __future__ import annotations

from typing import Any

from connectors.kube.dra.device_book import DraBook
from connectors.kube.dra.device_cards import DraCard, cards_for
from connectors.kube.dra.kinds import forget, record
from connectors.kube.dra.overlay import ClaimUse, node_with_dra, pod_with_dra
from models import Node, Pod

__all__ = ["DraView"]


class DraView:
    def __init__(self) -> None:
        self.book = DraBook()
        self._cards: dict[str, list[DraCard]] = {}

    def record(self, kind: str, raw: dict[str, Any]) -> str:
        """Read one object (MappingError when it cannot be); returns its key."""
        key = record(self.book, kind, raw)
        self._cards.clear()
        if kind == "DeviceClass":
            self.book.matched.clear()
        return key

    def forget(self, kind: str, key: str) -> None:
        forget(self.book, kind, key)
        self._cards.clear()
        if kind == "DeviceClass":
            self.book.matched.clear()

    def cards(self, node: str) -> list[DraCard]:
        out = self._cards.get(node)
        if out is None:
            out = self._cards[node] = cards_for(self.book, node)
        return out

    def node(self, node: Node) -> Node:
        return node_with_dra(node, self.cards(node.name))

    def pod(self, pod: Pod, uses: tuple[ClaimUse, ...]) -> Pod:
        return pod_with_dra(pod, uses, self.book, self.cards)
