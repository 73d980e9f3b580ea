"""Quota reclaim: evict the fewest lower-priority pods charged to a full queue, so that the
highest-priority pod it holds gets both its quota and a node.

A pod held by its queue (a Volcano queue at its ``capability``, a Kueue ClusterQueue at its
nominal quota plus borrowing limit, or without a cohort at its nominal quota) is not
unplaceable: a node may well take it, so ``unplaceable_pending`` never opens for it and
reclaim never plans for it. The queue's own ``quota_exhausted`` signal (``scope`` queue,
``streams/detectors/quota.py``) opens instead, once per filling; this planner answers it for
the pod that queue holds with the highest priority (the oldest among equals), one plan per
opening like the other planners. The victims are pods charged to the *same* queue (the pods
whose LocalQueue or Volcano queue maps to it, ``QueueView.queue_of``): only their quota comes
back to it. A plan is the fewest of them such that, with them gone, the queue has room for the
pod's request by the queue view's own rule (``QueueView.blocks`` on the ledger less what they
free: used - freed + requested <= the ceiling, what the cohort lends counted where it may
borrow) and the pod fits some node (their room counted, on the same what-if copy reclaim
proves on). Among equally few: borrowers (``_borrowers``: the pods bound after the queue's
guaranteed share was used up) first, then preemptible pods, then the lowest priority, then the
least GPU evicted. Every victim is asked
of the gate alone (``Searching.allowed``: protection, exemption, priority gap, cooldowns,
rates) and every set whole (``GateAsked``), so it proposes only what the gate would admit.

Not planned for: a ResourceQuota (a pod that exists already passed it, ``QueueView.blocks``;
the namespace's ``quota_exhausted`` is about work with no pods), a gang's members (a gang
waits as one; reclaim plans for it when it is unplaceable), a MIG or HAMi request
(``request_shape``), and a queue that is full only because its cohort lends nothing (its
signal is a borrowing finding, not ``quota_exhausted``). The queue's usage is not rehearsed in
a dry run: the signal stays open until the queue changes, so it is planned for once anyway.

Why propose what the queue system may not do itself: Kueue preempts within a ClusterQueue
only where its ``preemption.withinClusterQueue`` allows (``Never`` by default), and Volcano
only with its ``preempt`` action enabled. gpufrag's plan is the proof that the queue holds
lower-priority work whose quota would let the waiting pod run, made under the guardrails and,
by default, a dry run: a proposal to the operator, who can turn the queue system's own
preemption on or act by hand. Enforced, it is a pod eviction; in Kueue the quota is held by
the victim's Workload, which an eviction ends only where the Workload is the pod's own (a
plain pod); a Job's controller makes a new pod under the same admission. The plan's evidence
says so (``queue_system``, ``frees_quota_when``) rather than the planner refusing, so the
trail shows the fix either way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from itertools import combinations

import numpy as np
from pydantic import JsonValue

from models import Scope, Signal, SignalKind, TaskProfile
from models.actions import NoFix
from streams.cluster.queues import EPSILON, QueueQuota, QueueView, task_amounts
from streams.cluster.view import ClusterView
from streams.fragmentation.pending import hard_blocked
from streams.planners.candidates import Held, quotas_of
from streams.planners.no_fix import SearchTally, request_shape
from streams.planners.plan import Plan
from streams.planners.planner_registry import register_planner
from streams.planners.search import GateAsked, Searching
from streams.planners.trial_capacity import HOLDING, Scratch, cards_of, simple_request

__all__ = ["KIND", "MAX_CANDIDATES", "QuotaReclaim", "held_by"]

KIND = "quota_reclaim"
"""The plans' action kind: apart from reclaim's, so `gpufrag actions --kind` tells a plan that
frees a queue's quota from one that frees a node."""
MAX_CANDIDATES = 16
"""Pods of the queue weighed as victims, in the planner's order: C(16, 3) = 560 sets at the
default ``max_victims``, well inside ``search_budget`` (5,000)."""
KUEUE_NOTE = (
    "Kueue charges a Workload, not a pod: evicting a pod gives its quota back only when its "
    "Workload ends with it (a plain pod); Kueue's own preemption.withinClusterQueue: "
    "LowerPriority evicts the Workload"
)
VOLCANO_NOTE = "Volcano charges each running pod: its quota comes back when the pod is gone"


@dataclass(frozen=True, slots=True)
class _Search:
    """What one search for one held pod works with."""

    signal: Signal
    task: TaskProfile
    ledger: QueueQuota
    quotas: QueueView
    scratch: Scratch
    fits_now: int | None
    """A node it fits before any eviction (None: the victims must make room on one)."""
    blocked: np.ndarray
    """``hard_blocked`` for the task: nodes no eviction opens."""


class QuotaReclaim(Searching):
    name = "quota_reclaim"

    def subject(self, signal: Signal, view: ClusterView) -> str | None:
        """The pod this planner plans for on ``signal`` (the queue's held pod it would pick),
        so the acting step keeps a ``NoFix`` on that pod's explanation, not the queue's."""
        quotas = quotas_of(view)
        held = [] if quotas is None else held_by(signal, view, quotas, skip=self._landed)
        return held[0].key if held else None

    def _landed(self, key: str) -> bool:
        return self.rehearsal.landed(key)

    def plan(self, signal: Signal, view: ClusterView) -> Plan | NoFix | None:
        quotas = quotas_of(view)
        if quotas is None:
            return None
        held = held_by(signal, view, quotas, skip=self._landed)
        if not held:
            return None
        task = held[0]
        if not simple_request(task.requests):
            return request_shape(self.name)
        scratch = self.scratch(view)
        s = _Search(
            signal=signal,
            task=task,
            ledger=quotas.queues[signal.scope_id],
            quotas=quotas,
            scratch=scratch,
            fits_now=scratch.best_fit(task),
            blocked=hard_blocked(scratch.index, task),
        )
        gate = GateAsked(self.preview, kind=KIND, beneficiary_priority=task.priority)
        tally = SearchTally(candidate_means=f"pod charged to {s.ledger.key}")
        pool = self._pool(s, tally)
        if not pool:
            if tally.kept:  # every one the gate turned away
                return tally.no_fix(self.name, sets=gate.by_rule, most=self.settings.max_victims)
            return _shortage(
                self.name,
                "no_candidates",
                f"no running pod charged to {s.ledger.key} holds what it asks for",
            )
        return self._search(s, pool, gate, tally)

    def _pool(self, s: _Search, tally: SearchTally) -> list[Held]:
        """The queue's bound pods that give back some of what the pod asks of it, that the
        gate would let go alone, in the planner's order, at most ``MAX_CANDIDATES``."""
        asked = set(task_amounts(s.task))
        gone = self.rehearsal.gone()
        view = s.scratch.view
        charged = [
            t
            for t in view.tasks.values()
            if t.node is not None
            and t.phase in HOLDING
            and t.key not in gone
            and s.quotas.queue_of.get((t.key.split("/", 1)[0], t.queue or "")) == s.ledger.key
            and asked & set(task_amounts(t))
        ]
        borrowers = _borrowers(charged, s.ledger, _resource(s))
        nodes: set[str] = set()
        pool: list[Held] = []
        for t in sorted(charged, key=lambda t: t.key):
            cards = cards_of(view, t)
            if cards is None or t.node is None:
                continue
            tally.kept += 1
            nodes.add(t.node)
            if self.allowed(t, kind=KIND, beneficiary_priority=s.task.priority, tally=tally):
                pool.append(Held(t, cards, t.key in borrowers))
        tally.nodes = len(nodes)
        pool.sort(
            key=lambda h: (not h.borrower, not h.task.preemptible, h.task.priority, _gpus(h), h.key)
        )
        return pool[:MAX_CANDIDATES]

    def _search(
        self, s: _Search, pool: list[Held], gate: GateAsked, tally: SearchTally
    ) -> Plan | NoFix | None:
        """Sets of 1, 2, ... pods, the fewest first; among a size, the best by the order in
        the module's docstring that the gate admits whole."""
        most, budget = self.settings.max_victims, self.settings.search_budget
        if _blocks(s, pool):
            if tally.turned_away:
                tally.reachable = 0  # the pods the gate allows free too little
                return tally.no_fix(self.name, sets=gate.by_rule, most=most)
            room = _room_with(s, pool)
            return _shortage(
                self.name,
                "too_little",
                f"every pod charged to {s.ledger.key} that could go ({len(pool)}) gone would "
                f"leave it room for {room:g} of the {_asked(s):g} {_resource(s)} the pod asks",
            )
        if _landing(s, pool) is None:
            return _shortage(
                self.name,
                "no_node",
                f"{s.ledger.key} would have room, but no node could take the pod even with "
                f"every pod charged to it that could go ({len(pool)}) gone",
            )
        tried = 0
        for k in range(1, min(most, len(pool)) + 1):
            found: list[tuple[tuple[object, ...], tuple[Held, ...], int]] = []
            for combo in combinations(pool, k):
                tried += 1
                if tried > budget:
                    return _shortage(
                        self.name,
                        "search_budget",
                        f"search budget spent: {budget} victim sets tried among the pods "
                        f"charged to {s.ledger.key} without a plan",
                    )
                if _blocks(s, combo):
                    continue
                slot = _landing(s, combo)
                if slot is not None:
                    found.append((_score(combo), combo, slot))
            for _, combo, slot in sorted(found, key=lambda f: f[0]):
                if gate.admits([h.task for h in combo]):
                    return self._plan(s, combo, slot, gate)
        if gate.by_rule:
            return tally.no_fix(self.name, sets=gate.by_rule, most=most)
        return _shortage(
            self.name,
            "max_victims",
            f"no set of at most {most} pods charged to {s.ledger.key} gives back enough "
            "quota and a node for it",
        )

    def _plan(
        self, s: _Search, victims: tuple[Held, ...], slot: int, gate: GateAsked
    ) -> Plan | None:
        """The plan, proven on a fresh copy: before, the queue holds the pod; after, it has
        room and the pod fits the node chosen."""
        task, ledger = s.task, s.ledger
        proof = s.scratch.copy()
        _free(proof, victims)
        node = proof.index.names[slot] or ""
        if not proof.placeable(task)[slot] or _blocks(s, victims):
            return None  # the node search and the proof disagree: propose nothing unproven
        resource = _resource(s)
        before = s.quotas.blocks(task)[0]
        after = _after(s, victims)
        system = "volcano" if ledger.key.startswith("VolcanoQueue:") else "kueue"
        quota: dict[str, JsonValue] = {
            "queue": ledger.key,
            "resource": resource,
            "requested": before.requested,
            "limit": before.limit,
            "used_before": before.used,
            "room_before": before.room,
            "used_after": after.used.get(resource, 0.0),
            "room_after": _room_with(s, victims),
        }
        evidence: dict[str, JsonValue] = {
            **gate.evidence(),
            "beneficiary": task.key,
            "beneficiary_priority": task.priority,
            "queue": ledger.key,
            "queue_system": system,
            "frees_quota_when": KUEUE_NOTE if system == "kueue" else VOLCANO_NOTE,
            "victims": [
                {
                    "pod": h.key,
                    "node": h.task.node,
                    "priority": h.task.priority,
                    "gpu_milli": h.task.requests.total_gpu_milli,
                    "borrower": h.borrower,
                    "frees": task_amounts(h.task).get(resource, 0.0),
                }
                for h in victims
            ],
            "whatif": {
                "placeable_before": False,
                "placeable_after": True,
                "placed": {task.key: node},
                "quota": quota,
            },
        }
        return Plan(
            kind=KIND,
            signal=s.signal,
            reason=(
                f"evict {len(victims)} lower-priority pod(s) charged to {ledger.key} so that "
                f"pending {task.key} (priority {task.priority}) gets its quota and a node"
            ),
            evictions=tuple(h.task for h in victims),
            beneficiary=task.key,
            beneficiary_priority=task.priority,
            lands=((task, node),),
            evidence=evidence,
        )


def held_by(
    signal: Signal,
    view: ClusterView,
    quotas: QueueView,
    *,
    skip: Callable[[str], bool] = lambda _: False,
) -> list[TaskProfile]:
    """The pending pods a queue's open ``quota_exhausted`` signal holds (the queue is the
    first blocker of each), highest priority first, then the oldest; no gang members. ``skip``:
    a predicate on pod keys (a dry run's pods a rehearsed plan already placed)."""
    if (
        signal.kind != SignalKind.QUOTA_EXHAUSTED
        or signal.state != "open"
        or signal.scope != Scope.QUEUE
        or signal.scope_id not in quotas.queues
    ):
        return []
    out = []
    for key in view.pending:
        task = view.tasks.get(key)
        if task is None or task.gang is not None or skip(key):
            continue
        blocks = quotas.blocks(task)
        if blocks and blocks[0].key == signal.scope_id:
            out.append(task)
    return sorted(out, key=lambda t: (-t.priority, t.created_at, t.key))


def _borrowers(charged: list[TaskProfile], ledger: QueueQuota, resource: str) -> set[str]:
    """The pods that use borrowed quota: a queue charges no pod as borrowed, so, as Kueue
    admits a workload while the queue is over its nominal quota as borrowing, the pods bound
    after the guaranteed share was used up are the borrowers (bound order, then creation)."""
    guaranteed = ledger.guaranteed.get(resource, 0.0)
    if resource not in ledger.borrowed:
        return set()
    out: set[str] = set()
    used = 0.0
    for t in sorted(charged, key=lambda t: (t.bound_at or t.created_at, t.created_at, t.key)):
        used += task_amounts(t).get(resource, 0.0)
        if used > guaranteed + EPSILON:
            out.add(t.key)
    return out


def _after(s: _Search, victims: Sequence[Held]) -> QueueQuota:
    """The queue's ledger with ``victims`` gone: their amounts off its usage."""
    used = dict(s.ledger.used)
    for h in victims:
        for r, v in task_amounts(h.task).items():
            if r in used:
                used[r] = max(0.0, used[r] - v)
    return replace(s.ledger, used=used)


def _without(s: _Search, victims: Sequence[Held]) -> QueueView:
    after = _after(s, victims)
    return replace(s.quotas, queues={**s.quotas.queues, after.key: after})


def _blocks(s: _Search, victims: Sequence[Held]) -> bool:
    """Whether the queue still holds the pod with ``victims`` gone (the view's own rule)."""
    return bool(_without(s, victims).blocks(s.task))


def _room_with(s: _Search, victims: Sequence[Held]) -> float:
    """What the queue could take for the pod's first blocked resource with ``victims`` gone."""
    quotas = _without(s, victims)
    return quotas.headroom(quotas.queues[s.ledger.key], _resource(s))


def _resource(s: _Search) -> str:
    return s.quotas.blocks(s.task)[0].resource


def _asked(s: _Search) -> float:
    return s.quotas.blocks(s.task)[0].requested


def _landing(s: _Search, victims: Sequence[Held]) -> int | None:
    """A node the pod fits with ``victims`` gone: one it fits now, else one where the victims
    on it free enough (a node no eviction opens never counts)."""
    if s.fits_now is not None:
        return s.fits_now
    by_node: dict[int, list[Held]] = {}
    for h in victims:
        slot = s.scratch.index.slot.get(h.task.node or "")
        if slot is not None and not s.blocked[slot]:
            by_node.setdefault(slot, []).append(h)
    for slot in sorted(by_node):
        room = s.scratch.room(slot)
        if room is None:
            continue
        if room.without([(h.task, h.cards) for h in by_node[slot]]).fits(s.task.requests):
            return slot
    return None


def _free(scratch: Scratch, victims: Sequence[Held]) -> None:
    """Count the victims' room as free on ``scratch`` (victims on a node no search weighs,
    MIG or HAMi, give back quota only)."""
    for h in victims:
        slot = scratch.index.slot.get(h.task.node or "")
        room = None if slot is None else scratch.room(slot)
        if room is not None:
            room.without([(h.task, h.cards)]).write(scratch.free)


def _score(combo: tuple[Held, ...]) -> tuple[object, ...]:
    return (
        -sum(h.borrower for h in combo),
        -sum(h.task.preemptible for h in combo),
        max(h.task.priority for h in combo),
        sum(_gpus(h) for h in combo),
        tuple(sorted(h.key for h in combo)),
    )


def _gpus(h: Held) -> int:
    return h.task.requests.total_gpu_milli


def _shortage(planner: str, code: str, text: str) -> NoFix:
    return NoFix(planner=planner, code=code, guardrail=False, text=text)


register_planner(
    "quota_reclaim", QuotaReclaim.of, answers=[SignalKind.QUOTA_EXHAUSTED], evicts_only=True
)
