"""Pods the extender bound that its cluster view does not yet show bound.

kube-scheduler binds in the background and goes on to the next pod at once, and the watch shows
a binding only after the API server has stored it and the live stage has held it for its
allowed delay (2 s by default). Until then each such pod is charged here to the cards it was
given, so that two decisions in a row never hand out one card twice. The host passes the time
(monotonic seconds); nothing here reads a clock.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from models import ResourceRequest
from streams.cluster.view import ClusterView


@dataclass(frozen=True, slots=True)
class Assumed:
    key: str
    """The pod, "namespace/name"."""
    node: str
    request: ResourceRequest
    cards: tuple[int, ...]
    at_s: float


class AssumeCache:
    def __init__(self, *, ttl_s: float) -> None:
        self.ttl_s = ttl_s
        self._items: dict[str, Assumed] = {}
        self.generation = 0
        """Moves whenever the set changes: what is derived from it is kept for one."""
        self.expired = 0
        """Assumptions dropped because the watch never showed the pod bound in time."""

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[Assumed]:
        return iter(self._items.values())

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def get(self, key: str) -> Assumed | None:
        return self._items.get(key)

    def add(self, item: Assumed) -> None:
        self._items[item.key] = item
        self.generation += 1

    def drop(self, key: str) -> None:
        if self._items.pop(key, None) is not None:
            self.generation += 1

    def settle(self, view: ClusterView, now_s: float) -> None:
        """Drop the pods the view now counts (bound, on any node) and those unseen too long."""
        gone = []
        for key, item in self._items.items():
            task = view.tasks.get(key)
            if task is not None and task.node is not None:
                gone.append(key)
            elif now_s - item.at_s > self.ttl_s:
                gone.append(key)
                self.expired += 1
        for key in gone:
            del self._items[key]
        if gone:
            self.generation += 1
