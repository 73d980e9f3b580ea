"""Consolidate: move a few small pods off a partly used node so a pending job fits there.

A move is an eviction whose pod comes back (its controller recreates it) and lands elsewhere.
The plan is proposed only when the what-if places the job on the freed node and every moved
pod on another node, in that order, on one copy of the cluster. It ends nobody's work, so it
asks no priority gap of the gate, but it moves only pods of the job's priority or lower, and
only small ones (``movable_max_gpu_milli``): moving a big job costs more than it frees.
"""

from __future__ import annotations

from pydantic import JsonValue

from models import ActionKind, Signal, TaskProfile
from models.settings import GuardrailSettings, PlannerSettings
from streams.detectors.view import ClusterView
from streams.fragmentation.pending import hard_blocked
from streams.planners.candidates import Held, evictable, held_on, quotas_of
from streams.planners.plan import Plan
from streams.planners.reclaim import pending_of
from streams.planners.search import Found, fewest
from streams.planners.whatif import NodeRoom, Scratch, simple_request

__all__ = ["Consolidate"]


class Consolidate:
    name = "consolidate"

    def __init__(self, *, settings: PlannerSettings, guardrails: GuardrailSettings) -> None:
        self.settings = settings
        self.guardrails = guardrails

    def plan(self, signal: Signal, view: ClusterView) -> Plan | None:
        members = pending_of(signal, view)
        if len(members) != 1:  # a gang needs several freed nodes: reclaim plans those
            return None
        task = members[0]
        if task.requests.gpu_count == 0 or not simple_request(task.requests):
            return None
        scratch = Scratch(view)
        if scratch.placeable(task).any():
            return None
        rooms, pools = self._candidates(task, scratch)
        moves: dict[str, JsonValue] = {}

        def accept(found: Found) -> bool:
            trial = scratch.copy()
            found.after.write(trial.free)
            if not trial.placeable(task)[found.slot]:
                return False
            trial.place(task, found.slot)
            moves.clear()
            for h in sorted(found.chosen, key=lambda h: -h.task.requests.total_gpu_milli):
                to = trial.best_fit(h.task, exclude=frozenset({found.slot}))
                if to is None:
                    return False
                trial.place(h.task, to)
                moves[h.key] = view.index.names[to] or ""
            return True

        def score(slot: int, combo: tuple[Held, ...], after: NodeRoom) -> tuple[object, ...]:
            return (
                len(combo),
                sum(h.task.requests.total_gpu_milli for h in combo),
                round(scratch.frag_milli(after.placed(task.requests)), 3),
                view.index.names[slot] or "",
                tuple(sorted(h.key for h in combo)),
            )

        s = self.settings
        found = fewest(rooms, pools, task.requests, most=s.max_moves, score=score, accept=accept)
        if found is None:
            return None
        node = view.index.names[found.slot] or ""
        return Plan(
            kind=ActionKind.CONSOLIDATE,
            signal=signal,
            reason=(
                f"move {len(found.chosen)} small pod(s) off {node} so that pending {task.key} "
                f"({task.requests.gpu_count} GPU) fits there"
            ),
            evictions=tuple(h.task for h in found.chosen),
            beneficiary=task.key,
            evidence={
                "beneficiary": task.key,
                "node": node,
                "moves": dict(moves),
                "whatif": {"placeable_before": False, "placeable_after": True, "placed": node},
            },
        )

    def _candidates(
        self, task: TaskProfile, scratch: Scratch
    ) -> tuple[dict[int, NodeRoom], dict[int, list[Held]]]:
        s, g = self.settings, self.guardrails
        blocked = hard_blocked(scratch.index, task)
        quotas = quotas_of(scratch.view)
        rooms: dict[int, NodeRoom] = {}
        pools: dict[int, list[Held]] = {}
        for name, slot in scratch.index.slot.items():
            if blocked[slot]:
                continue
            room = scratch.room(slot)
            if room is None:
                continue
            pool = [
                h
                for h in held_on(scratch.view, name, quotas=quotas)
                if h.task.priority <= task.priority
                and 0 < h.task.requests.total_gpu_milli <= s.movable_max_gpu_milli
                and simple_request(h.task.requests)
                and evictable(h.task, g)
            ]
            if pool:
                pool.sort(key=lambda h: (h.task.requests.total_gpu_milli, h.task.priority, h.key))
                rooms[slot], pools[slot] = room, pool[: s.max_candidates_per_node]
        return rooms, pools
