"""The fewest pods to take off one node so that a request fits there.

Sizes are tried in order, 1, 2, ... up to a bound, over every node at once, so the first size
that works is the minimum over the cluster (within each node's candidate list): a plan never
evicts more pods than needed. Among the plans of that size a caller's score decides, and a
caller's ``accept`` may still turn one down (a consolidation whose movers find no room).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations

from models import ResourceRequest
from models.settings import GuardrailSettings, PlannerSettings
from streams.planners.candidates import Held, HeldCache
from streams.planners.whatif import NodeRoom

__all__ = ["Found", "Searching", "fewest"]

Score = tuple[object, ...]


class Searching:
    """What the planners that search for pods to evict share: their bounds, the guardrails
    they pre-filter by, and the nodes' held pods (one cache for both, see ``HeldCache``)."""

    def __init__(
        self,
        *,
        settings: PlannerSettings,
        guardrails: GuardrailSettings,
        cache: HeldCache | None = None,
    ) -> None:
        self.settings = settings
        self.guardrails = guardrails
        self.cache = cache or HeldCache()


@dataclass(frozen=True, slots=True)
class Found:
    slot: int
    chosen: tuple[Held, ...]
    after: NodeRoom
    """The node's room with ``chosen`` gone."""
    score: Score


def fewest(
    rooms: dict[int, NodeRoom],
    pools: Mapping[int, Sequence[Held]],
    req: ResourceRequest,
    *,
    most: int,
    score: Callable[[int, tuple[Held, ...], NodeRoom], Score],
    accept: Callable[[Found], bool] = lambda _: True,
    viable: Callable[[int, tuple[Held, ...]], bool] = lambda _slot, _combo: True,
    budget: int,
) -> Found | None:
    """``budget``: the most victim sets tried in all; past it the search gives up (no
    plan) rather than hold the cluster stage, and the signal's next planning tries again.
    ``viable``: a cheap check of a set that fits, before it
    is scored and offered to ``accept``."""
    live = {
        slot: pool
        for slot, pool in pools.items()
        if pool and rooms[slot].without([(h.task, h.cards) for h in pool]).fits(req)
    }  # a node where even all its candidates gone leaves too little is never tried again
    tried = 0
    for k in range(1, most + 1):
        found: list[Found] = []
        for slot, pool in live.items():
            room = rooms[slot]
            for combo in combinations(pool, k):
                tried += 1
                if tried > budget:
                    return None
                after = room.without([(h.task, h.cards) for h in combo])
                if after.fits(req) and viable(slot, combo):
                    found.append(Found(slot, combo, after, score(slot, combo, after)))
        for f in sorted(found, key=lambda f: f.score):
            if accept(f):
                return f
    return None
