"""Reclaim: evict the fewest lower-priority pods so a pending higher-priority pod or gang runs.

Victims must sit at least ``min_priority_gap`` below the pod they make room for (the gate's
own rule, asked through ``Searching.candidates``, as are its cooldowns and rates). Among plans
with equally few victims, those that give back borrowed quota come first, then Volcano's
preemptable pods, then the lowest priorities, then the plan leaving the least fragmentation
on its node (the FGD measure, after the pending pod is placed there). A gang's members are
planned one after another on one what-if copy, largest first: the sum of per-member minima,
not a proven minimum for the gang.
"""

from __future__ import annotations

from pydantic import JsonValue

from models import ActionKind, Signal, SignalKind, TaskProfile
from models.actions import NoFix
from streams.cluster.queues import QueueView
from streams.cluster.view import ClusterView
from streams.planners.candidates import Held, quotas_of
from streams.planners.no_fix import SearchTally, request_shape
from streams.planners.plan import Plan
from streams.planners.planner_registry import register_planner
from streams.planners.search import Found, GateAsked, Searching, fewest
from streams.planners.trial_capacity import NodeRoom, Scratch, simple_request

__all__ = ["Reclaim"]


class Reclaim(Searching):
    name = "reclaim"

    def plan(self, signal: Signal, view: ClusterView) -> Plan | NoFix | None:
        members = self.pending(signal, view)
        if not members:
            return None
        if not all(simple_request(t.requests) for t in members):
            return request_shape(self.name)
        scratch = self.scratch(view)
        quotas = quotas_of(view)
        needed = _needed(signal, len(members))
        # the gate checks the gap against the plan's least priority: ask about the same one
        gate = GateAsked(
            self.preview,
            kind=ActionKind.RECLAIM,
            beneficiary_priority=min(t.priority for t in members),
        )
        victims: list[Held] = []
        placed: dict[str, JsonValue] = {}
        lands: list[tuple[TaskProfile, str]] = []
        for task in members[:needed]:
            slot = scratch.best_fit(task)
            if slot is None:
                tally = SearchTally()
                found = self._victims(task, scratch, quotas, victims, gate, tally)
                if found is None:
                    most = self.settings.max_victims
                    return tally.no_fix(self.name, sets=gate.by_rule, most=most)
                found.after.write(scratch.free)
                victims += found.chosen
                slot = found.slot
                if not scratch.placeable(task)[slot]:  # the node search and the proof disagree
                    return None
            scratch.place(task, slot)
            placed[task.key] = view.index.names[slot] or ""
            lands.append((task, view.index.names[slot] or ""))
        if not victims:
            return None  # it fits without evicting anyone now: nothing to do
        return self._plan(signal, members, victims, placed, lands=lands, gate=gate)

    def _victims(
        self,
        task: TaskProfile,
        scratch: Scratch,
        quotas: QueueView | None,
        taken: list[Held],
        gate: GateAsked,
        tally: SearchTally,
    ) -> Found | None:
        s = self.settings
        gang = None if task.gang is None else task.gang.name
        rooms, pools = self.candidates(
            task,
            scratch,
            kind=ActionKind.RECLAIM,
            beneficiary_priority=gate.beneficiary_priority,
            quotas=quotas,
            skip=frozenset(h.key for h in taken),
            keep=lambda h: gang is None or h.task.gang is None or h.task.gang.name != gang,
            order=lambda h: (not h.borrower, not h.task.preemptible, h.task.priority),
            tally=tally,
        )

        def score(slot: int, combo: tuple[Held, ...], after: NodeRoom) -> tuple[object, ...]:
            return (
                len(combo),
                -sum(h.borrower for h in combo),
                -sum(h.task.preemptible for h in combo),
                max(h.task.priority for h in combo),
                round(scratch.frag_milli(after.placed(task.requests)), 3),
                scratch.index.names[slot] or "",
                tuple(sorted(h.key for h in combo)),
            )

        return fewest(
            rooms,
            pools,
            task.requests,
            most=s.max_victims,
            score=score,
            # the whole plan so far with this set: the gate admits a plan whole or not at all
            accept=lambda f: gate.admits([h.task for h in (*taken, *f.chosen)]),
            budget=s.search_budget,
            tally=tally,
        )

    def _plan(
        self,
        signal: Signal,
        members: list[TaskProfile],
        victims: list[Held],
        placed: dict[str, JsonValue],
        *,
        lands: list[tuple[TaskProfile, str]],
        gate: GateAsked,
    ) -> Plan:
        first = members[0]

        who = signal.scope_id
        return Plan(
            kind=ActionKind.RECLAIM,
            signal=signal,
            reason=(
                f"evict {len(victims)} lower-priority pod(s) so that pending {who} "
                f"(priority {first.priority}) can be placed"
            ),
            evictions=tuple(h.task for h in victims),
            beneficiary=who,
            beneficiary_priority=min(t.priority for t in members),
            lands=tuple(lands),
            evidence={
                **gate.evidence(),
                "beneficiary": who,
                "beneficiary_priority": min(t.priority for t in members),
                "victims": [
                    {
                        "pod": h.key,
                        "node": h.task.node,
                        "priority": h.task.priority,
                        "gpu_milli": h.task.requests.total_gpu_milli,
                        "borrower": h.borrower,
                    }
                    for h in victims
                ],
                "whatif": {"placeable_before": False, "placeable_after": True, "placed": placed},
            },
        )


def _needed(signal: Signal, members: int) -> int:
    needed = signal.evidence.get("needed")
    return members if not isinstance(needed, int) else min(members, needed)


register_planner("reclaim", Reclaim.of, answers=[SignalKind.UNPLACEABLE_PENDING], evicts_only=True)
