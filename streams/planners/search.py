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
from typing import Self

from models import ResourceRequest, TaskProfile
from models.settings import GuardrailSettings, PlannerSettings
from streams.cluster.queues import QueueView
from streams.fragmentation.pending import hard_blocked
from streams.planners.candidates import Held, HeldCache, evictable, held_on
from streams.planners.planner_registry import PlannerInputs
from streams.planners.trial_capacity import NodeRoom, Scratch, could_host

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

    @classmethod
    def of(cls, inputs: PlannerInputs) -> Self:
        """The registry's builder: one held-pods cache for every searching planner."""
        return cls(settings=inputs.settings, guardrails=inputs.guardrails, cache=inputs.held)

    def candidates(
        self,
        task: TaskProfile,
        scratch: Scratch,
        *,
        quotas: QueueView | None,
        keep: Callable[[Held], bool],
        order: Callable[[Held], tuple[int | str, ...]],
        skip: frozenset[str] = frozenset(),
    ) -> tuple[dict[int, NodeRoom], dict[int, list[Held]]]:
        """Per node a search visits for ``task`` (the ``search_nodes`` nearest to fitting
        it), the node's room and the pods that may leave it: held there, not in ``skip``,
        evictable by the gate's rules, kept by the planner's own ``keep``, in its ``order``,
        at most ``max_candidates_per_node``. Nodes with no such pod are left out."""
        s = self.settings
        blocked = hard_blocked(scratch.index, task)
        rooms: dict[int, NodeRoom] = {}
        pools: dict[int, list[Held]] = {}
        for slot in could_host(scratch.index, task, blocked, nearest=s.search_nodes):
            name = scratch.index.names[slot] or ""
            room = scratch.room(slot)
            if room is None:
                continue
            held = held_on(scratch.view, name, quotas=quotas, skip=skip, cache=self.cache)
            pool = [h for h in held if keep(h) and evictable(h.task, self.guardrails)]
            if pool:
                pool.sort(key=order)
                rooms[slot], pools[slot] = room, pool[: s.max_candidates_per_node]
        return rooms, pools


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
