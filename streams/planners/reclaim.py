"""Reclaim: evict the fewest lower-priority pods so a pending higher-priority pod or gang runs.

Victims must sit at least ``min_priority_gap`` below the pod they make room for. Among plans
with equally few victims, those that give back borrowed quota come first, then Volcano's
preemptable pods, then the lowest priorities, then the plan leaving the least fragmentation
on its node (the FGD measure, after the pending pod is placed there). A gang's members are
planned one after another on one what-if copy, largest first: the sum of per-member minima,
not a proven minimum for the gang.
"""

from __future__ import annotations

from pydantic import JsonValue

from models import ActionKind, Signal, SignalKind, TaskProfile
from streams.cluster.queues import QueueView
from streams.cluster.view import ClusterView
from streams.planners.candidates import Held, quotas_of
from streams.planners.plan import Plan
from streams.planners.planner_registry import register_planner
from streams.planners.search import Found, Searching, fewest
from streams.planners.trial_capacity import NodeRoom, Scratch, simple_request

__all__ = ["Reclaim", "pending_of"]


def pending_of(signal: Signal, view: ClusterView) -> list[TaskProfile]:
    """The pending pod an unplaceable signal names, or its gang's pending members."""
    if signal.kind != SignalKind.UNPLACEABLE_PENDING or signal.state != "open":
        return []
    if "/gang:" not in signal.scope_id:
        task = view.tasks.get(signal.scope_id)
        return [task] if task is not None and task.key in view.pending else []
    namespace, gang = signal.scope_id.split("/gang:", 1)
    members = [
        view.tasks[k]
        for k in sorted(view.pending)
        if k.startswith(f"{namespace}/")
        and (g := view.tasks[k].gang) is not None
        and g.name == gang
    ]
    return sorted(members, key=lambda t: (-t.requests.total_gpu_milli, t.key))


class Reclaim(Searching):
    name = "reclaim"

    def plan(self, signal: Signal, view: ClusterView) -> Plan | None:
        members = pending_of(signal, view)
        if not members or not all(simple_request(t.requests) for t in members):
            return None
        scratch = Scratch(view)
        quotas = quotas_of(view)
        needed = _needed(signal, len(members))
        victims: list[Held] = []
        placed: dict[str, JsonValue] = {}
        for task in members[:needed]:
            slot = scratch.best_fit(task)
            if slot is None:
                found = self._victims(task, scratch, quotas, {h.key for h in victims})
                if found is None:
                    return None
                found.after.write(scratch.free)
                victims += found.chosen
                slot = found.slot
                if not scratch.placeable(task)[slot]:  # the node search and the proof disagree
                    return None
            scratch.place(task, slot)
            placed[task.key] = view.index.names[slot] or ""
        if not victims:
            return None  # it fits without evicting anyone now: nothing to do
        return self._plan(signal, members, victims, placed)

    def _victims(
        self, task: TaskProfile, scratch: Scratch, quotas: QueueView | None, taken: set[str]
    ) -> Found | None:
        s = self.settings
        ceiling = task.priority - self.guardrails.min_priority_gap
        gang = None if task.gang is None else task.gang.name
        rooms, pools = self.candidates(
            task,
            scratch,
            quotas=quotas,
            skip=frozenset(taken),
            keep=lambda h: (
                h.task.priority <= ceiling
                and (gang is None or h.task.gang is None or h.task.gang.name != gang)
            ),
            order=lambda h: (not h.borrower, not h.task.preemptible, h.task.priority),
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
            rooms, pools, task.requests, most=s.max_victims, score=score, budget=s.search_budget
        )

    def _plan(
        self,
        signal: Signal,
        members: list[TaskProfile],
        victims: list[Held],
        placed: dict[str, JsonValue],
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
            evidence={
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
