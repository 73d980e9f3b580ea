"""Nodes whose bound pods ask for more than the node can hold, in a saved snapshot.

The kubelet refuses a pod that does not fit (``OutOfcpu``, ``UnexpectedAdmissionError``), so a
live node is never over its allocatable; a snapshot can be (allocatable shrank after a card
failed, a hand-edited file). Its free capacity then reads as none, or below zero, and every
figure for it changes without a word: each such node is named instead.
"""

from __future__ import annotations

from collections import defaultdict
from decimal import Decimal
from typing import Any

from connectors.kube.gpu.resource_names import GPU, GPU_SHARED, mig_profile
from connectors.kube.quantity import QuantityError, parse_amount
from connectors.kube.watch.pods import pod_requests

__all__ = ["Overcommit"]

_DONE = frozenset({"Succeeded", "Failed"})
"""Phases whose pods no longer hold their requests (the scheduler's own rule)."""


def _counted(resource: str) -> bool:
    """What the scheduler counts against allocatable and a snapshot's node states: CPU,
    memory and device counts. HAMi's per-card ``gpumem``/``gpucores`` are no node totals."""
    return resource in ("cpu", "memory", GPU, GPU_SHARED) or mig_profile(resource) is not None


def _shown(resource: str, amount: Decimal) -> str:
    if resource == "memory":
        return f"{amount / (1024 * 1024):.0f}Mi"
    return f"{amount.normalize():f}"


class Overcommit:
    """Sums the requests of the pods bound to each node and compares them with its
    allocatable once every object is read (a pod may come before its node)."""

    def __init__(self) -> None:
        self.allocatable: dict[str, dict[str, Decimal]] = {}
        self.requested: dict[str, dict[str, Decimal]] = defaultdict(dict)
        self.pods: dict[str, int] = defaultdict(int)

    def node(self, obj: Any) -> None:
        status = obj.status
        raw: dict[str, Any] = dict((status.allocatable or status.capacity or {}) if status else {})
        out: dict[str, Decimal] = {}
        for name, value in raw.items():
            if _counted(name):
                try:
                    out[name] = parse_amount(value)
                except QuantityError:  # the node's mapping has refused it already
                    continue
        self.allocatable[obj.metadata.name] = out

    def pod(self, obj: Any) -> None:
        spec, status = obj.spec, obj.status
        phase = status.phase if status else None
        if not spec.node_name or phase in _DONE:
            return
        held = self.requested[spec.node_name]
        for name, amount in pod_requests(spec).items():
            if _counted(name) and amount > 0:
                held[name] = held.get(name, Decimal(0)) + amount
        self.pods[spec.node_name] += 1

    def warnings(self) -> list[str]:
        """One line per node over its allocatable (every resource over it named)."""
        out: list[str] = []
        for node in sorted(self.requested):
            if node not in self.allocatable:
                continue  # a pod bound to a node the snapshot lacks: not a node to judge
            has = self.allocatable[node]
            over = [
                f"{_shown(r, amount)} {r} of {_shown(r, has.get(r, Decimal(0)))}"
                for r, amount in sorted(self.requested[node].items())
                if amount > has.get(r, Decimal(0))
            ]
            if over:
                out.append(
                    f"Node {node}: its {self.pods[node]} bound pods request more than it "
                    f"holds ({', '.join(over)} allocatable); its free capacity and "
                    "fragmentation are off"
                )
        return out
