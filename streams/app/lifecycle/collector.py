"""How a long-running command uses CPython's cyclic garbage collector.

The pipeline's state is hundreds of thousands to millions of small objects (a node's profile is
about 40: the model, its dict, its cards and theirs), nearly all of them freed by reference
counting when replaced, never through a cycle. CPython still walks all of them in each full
collection, and starts one each time a quarter as many new objects survived as were there after
the last: a GPU sample replaces its node's profile, so under a steady stream of samples full
collections come at a steady rate, each as long as the state is big. Streaming 20,000 samples
at 4,000 nodes, 20 full collections took 4.1-4.6 s of about 20 s; at 10,000 nodes one took 1.3 s
(docs/performance.md, "The collector at 10,000 nodes").

So what survived a full collection is frozen (``gc.freeze``): later collections walk only what
is newer. A frozen object that dies through a cycle is not freed while it is frozen, so once
the frozen objects have grown to ``growth`` times what a full walk last left, everything is
unfrozen first and that collection walks it all: cyclic garbage then waits at most until the
frozen set has doubled (with the default), and the full walks stay as rare, relative to the
objects created, as CPython's own rule makes them. Objects freed by reference counting leave
the frozen set as they go, so a state that stays the same size triggers no full walk at all.
"""

from __future__ import annotations

import gc
from typing import Any

__all__ = ["CollectorPolicy", "collector_policy"]

_OLDEST = len(gc.get_count()) - 1
"""The generation a full collection collects (2 on CPython 3.11-3.13)."""


class CollectorPolicy:
    def __init__(self, *, growth: float = 2.0) -> None:
        if growth <= 1.0:
            raise ValueError(f"growth must be above 1, got {growth}")
        self.growth = growth
        self.walked = 0
        """Objects a full walk left behind (frozen after it): the base ``growth`` counts from."""
        self.full_walks = 0
        self.partial_walks = 0
        self._walking = False
        self._installed = False

    def install(self) -> None:
        if not self._installed:
            gc.callbacks.append(self._on_collection)
            self._installed = True

    def uninstall(self) -> None:
        """Stop freezing and give every frozen object back to the collector."""
        if self._installed:
            gc.callbacks.remove(self._on_collection)
            self._installed = False
        gc.unfreeze()

    def _on_collection(self, phase: str, info: dict[str, Any]) -> None:
        if info.get("generation") != _OLDEST:
            return  # a young generation: nothing frozen is walked anyway
        if phase == "start":
            frozen = gc.get_freeze_count()
            self._walking = frozen == 0 or frozen > self.growth * self.walked
            if self._walking and frozen:
                gc.unfreeze()  # this collection walks every object
            return
        if self._walking:
            self.full_walks += 1
        else:
            self.partial_walks += 1
        gc.freeze()
        if self._walking:
            self.walked = gc.get_freeze_count()


_POLICY = CollectorPolicy()


def collector_policy() -> CollectorPolicy:
    """The process's one policy, installed (a second call installs nothing more)."""
    _POLICY.install()
    return _POLICY
