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

from pydantic import JsonValue

from models import ResourceRequest, Signal, TaskProfile
from models.actions import ActionKindName
from models.settings import GuardrailSettings, PlannerSettings
from streams.cluster.queues import QueueView
from streams.cluster.view import ClusterView
from streams.fragmentation.pending import hard_blocked
from streams.planners.candidates import Held, HeldCache, held_on
from streams.planners.gate_preview import GatePreview
from streams.planners.no_fix import RuleCount, SearchTally
from streams.planners.pending_members import pending_of
from streams.planners.planner_registry import PlannerInputs
from streams.planners.rehearsal import Rehearsal
from streams.planners.trial_capacity import NodeRoom, Scratch, could_host

__all__ = ["MAX_REFUSED_SETS", "Found", "GateAsked", "Searching", "fewest"]

Score = tuple[object, ...]

MAX_REFUSED_SETS = 8
"""Victim sets the gate may refuse in one search before it gives up (no plan; the signal's
next planning tries again). Every victim the search weighs has already passed the gate alone
(cooldowns and rates included), so a set is refused only for a rate two or more of its pods
pass together: the node limit (2 per window) or the namespace one (5). Past 8 refusals the
limit is nearly used up for every set of that size, and each further try costs a copy of the
ledger (tens of microseconds) for a plan the next instant may well find anyway."""


class GateAsked:
    """Counts the victim sets a search offered the gate and the ones it refused, by rule
    (``by_rule``: what a search that ends with no plan reports, ``no_fix.py``)."""

    def __init__(
        self,
        preview: GatePreview,
        *,
        kind: ActionKindName,
        beneficiary_priority: int | None,
        most: int = MAX_REFUSED_SETS,
    ) -> None:
        self.preview = preview
        self.kind = kind
        self.beneficiary_priority = beneficiary_priority
        self.most = most
        self.refused = 0
        self.by_rule: dict[str, RuleCount] = {}

    def admits(self, tasks: list[TaskProfile]) -> bool:
        """Whether the gate would admit evicting ``tasks`` as one plan now. Past ``most``
        refusals every answer is no, so the search ends without a plan."""
        if self.refused >= self.most:
            return False
        refusal = self.preview.victims(
            tasks, kind=self.kind, beneficiary_priority=self.beneficiary_priority
        )
        if refusal is None:
            return True
        self.refused += 1
        count = self.by_rule.get(refusal.code)
        if count is None:
            count = self.by_rule[refusal.code] = RuleCount(refusal)
        count.add(refusal, None)
        return False

    def evidence(self) -> dict[str, JsonValue]:
        """For the plan's evidence: how many cheaper sets the gate would have refused before
        this one (nothing when none), so the trail shows a plan is a second choice."""
        return {"gate_refused_sets": self.refused} if self.refused else {}


class Searching:
    """What the planners that search for pods to evict share: their bounds, the gate they
    ask before proposing (``GatePreview``), the dry run's rehearsed plans, and the nodes'
    held pods (one cache for both, see ``HeldCache``)."""

    def __init__(
        self,
        *,
        settings: PlannerSettings,
        guardrails: GuardrailSettings,
        cache: HeldCache | None = None,
        preview: GatePreview | None = None,
        rehearsal: Rehearsal | None = None,
    ) -> None:
        self.settings = settings
        self.guardrails = guardrails
        self.cache = cache or HeldCache()
        self.preview = preview or GatePreview.standalone(guardrails)
        self.rehearsal = rehearsal or Rehearsal()

    @classmethod
    def of(cls, inputs: PlannerInputs) -> Self:
        """The registry's builder: one held-pods cache, one gate preview and one rehearsal
        for every searching planner."""
        return cls(
            settings=inputs.settings,
            guardrails=inputs.guardrails,
            cache=inputs.held,
            preview=inputs.preview,
            rehearsal=inputs.rehearsal,
        )

    def pending(self, signal: Signal, view: ClusterView) -> list[TaskProfile]:
        """The pending pods ``signal`` names, less those a rehearsed plan already placed."""
        return [t for t in pending_of(signal, view) if not self.rehearsal.landed(t.key)]

    def scratch(self, view: ClusterView) -> Scratch:
        """A copy of the free capacity to plan on, with the rehearsed plans counted as done."""
        scratch = Scratch(view)
        self.rehearsal.apply(scratch)
        return scratch

    def allowed(
        self,
        task: TaskProfile,
        *,
        kind: ActionKindName,
        beneficiary_priority: int | None,
        tally: SearchTally | None = None,
    ) -> bool:
        """Whether the gate would let a ``kind`` plan for ``beneficiary_priority`` evict
        ``task`` alone now; a refusal is counted in ``tally`` by its rule."""
        refusal = self.preview.victim(task, kind=kind, beneficiary_priority=beneficiary_priority)
        if refusal is not None and tally is not None:
            tally.refused(refusal, task.node)
        return refusal is None

    def candidates(
        self,
        task: TaskProfile,
        scratch: Scratch,
        *,
        kind: ActionKindName,
        beneficiary_priority: int | None,
        quotas: QueueView | None,
        keep: Callable[[Held], bool],
        order: Callable[[Held], tuple[int | str, ...]],
        skip: frozenset[str] = frozenset(),
        tally: SearchTally | None = None,
    ) -> tuple[dict[int, NodeRoom], dict[int, list[Held]]]:
        """Per node a search visits for ``task`` (the ``search_nodes`` nearest to fitting
        it), the node's room and the pods that may leave it: held there, not in ``skip`` nor
        evicted by a rehearsed plan, kept by the planner's own ``keep``, that the gate would
        let a ``kind`` plan for ``beneficiary_priority`` evict now (protection, priority gap,
        cooldowns, rates: its own filters, asked through the preview), in the planner's
        ``order``, at most ``max_candidates_per_node``. Nodes with no such pod are left
        out. ``tally`` counts what was visited and which rule turned how many pods away."""
        s = self.settings
        skip = skip | self.rehearsal.gone()
        blocked = hard_blocked(scratch.index, task)
        rooms: dict[int, NodeRoom] = {}
        pools: dict[int, list[Held]] = {}

        def allowed(h: Held) -> bool:
            return self.allowed(
                h.task, kind=kind, beneficiary_priority=beneficiary_priority, tally=tally
            )

        for slot in could_host(scratch.index, task, blocked, nearest=s.search_nodes):
            name = scratch.index.names[slot] or ""
            room = scratch.room(slot)
            if room is None:
                continue
            held = held_on(scratch.view, name, quotas=quotas, skip=skip, cache=self.cache)
            kept = [h for h in held if keep(h)]
            pool = [h for h in kept if allowed(h)]
            if tally is not None:
                tally.nodes += 1
                tally.kept += len(kept)
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
    tally: SearchTally | None = None,
) -> Found | None:
    """``budget``: the most victim sets tried in all; past it the search gives up (no
    plan) rather than hold the cluster stage, and the signal's next planning tries again.
    ``viable``: a cheap check of a set that fits, before it
    is scored and offered to ``accept``. ``tally``: where a search that finds nothing says
    how far it got (nodes in reach, sets that fit, the budget)."""
    live = {
        slot: pool
        for slot, pool in pools.items()
        if pool and rooms[slot].without([(h.task, h.cards) for h in pool]).fits(req)
    }  # a node where even all its candidates gone leaves too little is never tried again
    if tally is not None:
        tally.reachable = len(live)
    tried = 0
    for k in range(1, most + 1):
        found: list[Found] = []
        for slot, pool in live.items():
            room = rooms[slot]
            for combo in combinations(pool, k):
                tried += 1
                if tried > budget:
                    if tally is not None:
                        tally.budget_spent = f"{budget} victim sets tried"
                    return None
                after = room.without([(h.task, h.cards) for h in combo])
                if not after.fits(req):
                    continue
                if viable(slot, combo):
                    found.append(Found(slot, combo, after, score(slot, combo, after)))
                elif tally is not None:
                    tally.not_viable += 1
        for f in sorted(found, key=lambda f: f.score):
            if accept(f):
                return f
    return None
