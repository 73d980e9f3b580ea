"""Consolidate: move a few small pods off a partly used node so a pending job fits there.

A move is an eviction whose pod comes back (its controller recreates it) and lands elsewhere.
The plan is proposed only when the what-if places the job on the freed node and every moved
pod on another node, in that order, on one copy of the cluster. It ends nobody's work, so it
asks no priority gap of the gate, but it moves only pods of the job's priority or lower, and
only small ones (``movable_max_gpu_milli``): moving a big job costs more than it frees.
"""

from __future__ import annotations

import numpy as np
from pydantic import JsonValue

from models import ActionKind, Signal, SignalKind, TaskProfile
from models.actions import NoFix
from streams.cluster.view import ClusterView
from streams.fragmentation.measure import RULE_MILLI
from streams.fragmentation.pending import hard_blocked
from streams.planners.candidates import Held, quotas_of
from streams.planners.no_fix import SearchTally, request_shape
from streams.planners.plan import Plan
from streams.planners.planner_registry import register_planner
from streams.planners.search import Found, GateAsked, Searching, fewest
from streams.planners.trial_capacity import (
    NodeRoom,
    ReadOnlyScratch,
    Scratch,
    simple_request,
)

__all__ = ["Consolidate"]

MAX_PROOFS = 20
"""Whole-cluster what-ifs one plan may try (about a millisecond each on 1,213 nodes): past
that the job waits for the next evaluation rather than stall the stage."""


class Consolidate(Searching):
    name = "consolidate"
    _kept: tuple[ReadOnlyScratch, Elsewhere] | None = None

    def plan(self, signal: Signal, view: ClusterView) -> Plan | NoFix | None:
        members = self.pending(signal, view)
        if len(members) != 1:  # a gang needs several freed nodes: reclaim plans those
            return None
        task = members[0]
        if task.requests.gpu_count == 0:
            return None
        if not simple_request(task.requests):
            return request_shape(self.name)
        scratch, elsewhere = self._prepared(view)
        if scratch.placeable(task).any():
            return None
        s = self.settings
        tally = SearchTally(
            noun="pod that could move",
            candidate_means=(
                f"pod of at most {s.movable_max_gpu_milli} milli-GPU and of its priority or lower"
            ),
        )
        rooms, pools = self._candidates(task, scratch, tally)
        moves: dict[str, JsonValue] = {}
        lands: list[tuple[TaskProfile, str]] = []
        tries = [0]
        # a move asks no priority gap: the gate is asked without a beneficiary priority
        gate = GateAsked(self.preview, kind=ActionKind.CONSOLIDATE, beneficiary_priority=None)

        def accept(found: Found) -> bool:
            if tries[0] >= MAX_PROOFS:
                tally.budget_spent = f"{MAX_PROOFS} what-if proofs tried"
                return False
            if not gate.admits([h.task for h in found.chosen]):
                return False  # the gate first: a refused set is not worth a whole-cluster proof
            tries[0] += 1
            trial = scratch.copy()
            found.after.write(trial.free)
            trial.place(task, found.slot)
            moves.clear()
            lands[:] = [(task, view.index.names[found.slot] or "")]
            for h in sorted(found.chosen, key=lambda h: -h.task.requests.total_gpu_milli):
                to = trial.best_fit(h.task, exclude=frozenset({found.slot}))
                if to is None:
                    tally.unmovable += 1
                    return False
                trial.place(h.task, to)
                moves[h.key] = view.index.names[to] or ""
                lands.append((h.task, view.index.names[to] or ""))
            return True

        def score(slot: int, combo: tuple[Held, ...], after: NodeRoom) -> tuple[object, ...]:
            return (
                len(combo),
                sum(h.task.requests.total_gpu_milli for h in combo),
                round(scratch.frag_milli(after.placed(task.requests)), 3),
                view.index.names[slot] or "",
                tuple(sorted(h.key for h in combo)),
            )

        found = fewest(
            rooms,
            pools,
            task.requests,
            most=s.max_moves,
            budget=s.search_budget,
            viable=lambda slot, combo: all(elsewhere.fits(h.task, slot) for h in combo),
            score=score,
            accept=accept,
            tally=tally,
        )
        if found is None:
            return tally.no_fix(self.name, sets=gate.by_rule, most=s.max_moves)
        proof = scratch.copy()
        found.after.write(proof.free)
        if not proof.placeable(task)[found.slot]:  # the node search and the proof disagree
            return None
        node = view.index.names[found.slot] or ""
        return _proposal(signal, task, found, node=node, moves=moves, lands=lands, gate=gate)

    def _prepared(self, view: ClusterView) -> tuple[Scratch, Elsewhere]:
        """The cluster to plan on, and where its pods could go: kept while the view and its
        capacity index are unchanged, so the held-back search that follows a refused one
        at the same instant (1,364 of the 4,146 consolidations planned in an enforced replay
        of the bundled trace) builds neither again. Rebuilt each time while a dry run's
        rehearsed plans are counted: they read the pods as well as the capacity."""
        if self.rehearsal.entries:
            scratch = self.scratch(view)
            return scratch, Elsewhere(scratch)
        if self._kept is None or not self._kept[0].current(view):
            scratch = ReadOnlyScratch(view)
            self._kept = (scratch, Elsewhere(scratch))
        return self._kept

    def _candidates(
        self, task: TaskProfile, scratch: Scratch, tally: SearchTally
    ) -> tuple[dict[int, NodeRoom], dict[int, list[Held]]]:
        """Per node, the pods that could move: small, not above the job's priority, allowed
        to be evicted, and with room on some other node as the cluster is now (a pod with
        nowhere to go is in no plan: ``Elsewhere`` rules those out once a set fits the node)."""
        s = self.settings
        return self.candidates(
            task,
            scratch,
            kind=ActionKind.CONSOLIDATE,
            beneficiary_priority=None,
            quotas=quotas_of(scratch.view),
            keep=lambda h: (
                h.task.priority <= task.priority
                and 0 < h.task.requests.total_gpu_milli <= s.movable_max_gpu_milli
                and simple_request(h.task.requests)
            ),
            order=lambda h: (h.task.requests.total_gpu_milli, h.task.priority, h.key),
            tally=tally,
        )


def _proposal(
    signal: Signal,
    task: TaskProfile,
    found: Found,
    *,
    node: str,
    moves: dict[str, JsonValue],
    lands: list[tuple[TaskProfile, str]],
    gate: GateAsked,
) -> Plan:
    """The plan the search proved: ``found``'s pods moved as ``moves`` says, ``task`` on
    ``node``."""
    return Plan(
        kind=ActionKind.CONSOLIDATE,
        signal=signal,
        reason=(
            f"move {len(found.chosen)} small pod(s) off {node} so that pending {task.key} "
            f"({task.requests.gpu_count} GPU) fits there"
        ),
        evictions=tuple(h.task for h in found.chosen),
        beneficiary=task.key,
        lands=tuple(lands),
        evidence={
            **gate.evidence(),
            "beneficiary": task.key,
            "node": node,
            "moves": dict(moves),
            "whatif": {"placeable_before": False, "placeable_after": True, "placed": node},
        },
    )


class Elsewhere:
    """Whether a pod could go to some node other than its own, as the cluster is now: CPU,
    memory and enough cards with its share free, on a node its GPU models, taints and the
    cordons allow. A necessary condition, a few array comparisons per pod and plan; the
    plan's proof then places the movers for real. The hard limits are computed once per set
    of models and tolerations, which a cluster has few of."""

    def __init__(self, scratch: Scratch) -> None:
        self.scratch = scratch
        free, index = scratch.free, scratch.index
        self.fixed = np.where(index.rule == RULE_MILLI, -1, index.fixed)
        self.by_rank = -np.sort(-free.gpu, axis=1)
        """Each node's cards' free share, largest first: column k-1 says whether k cards
        have a share free."""
        self.cpu, self.mem = free.cpu, free.mem
        self.hard: dict[tuple[object, ...], np.ndarray] = {}
        self.known: dict[int, tuple[TaskProfile, np.ndarray, int]] = {}

    def fits(self, task: TaskProfile, slot: int) -> bool:
        # by the profile object (kept with the answer, so its id is not reused): kept across
        # plans, a pod's key could name a profile whose requests changed since
        hit = self.known.get(id(task))
        if hit is None:
            ok = self._where(task)
            hit = self.known[id(task)] = (task, ok, int(ok.sum()))
        _, ok, count = hit
        return count - int(ok[slot]) > 0

    def _where(self, task: TaskProfile) -> np.ndarray:
        r = task.requests
        key: tuple[object, ...] = (task.gpu_models, task.tolerations)
        hard = self.hard.get(key)
        if hard is None:
            hard = self.hard[key] = hard_blocked(self.scratch.index, task)
        ok = ~hard & (self.cpu >= r.cpu_milli) & (self.mem >= r.memory_mib)
        if r.gpu_count:
            if r.gpu_count > self.by_rank.shape[1]:
                return np.zeros_like(ok)
            share = np.where(self.fixed < 0, r.gpu_milli, self.fixed)
            ok &= self.by_rank[:, r.gpu_count - 1] >= share
        return ok


register_planner(
    "consolidate", Consolidate.of, answers=[SignalKind.UNPLACEABLE_PENDING], evicts_only=True
)
