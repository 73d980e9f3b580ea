"""A dry run's memory of the plans it admitted, so the next plans see the cluster as enforce
would have left it.

In enforce mode an admitted plan changes the cluster: the victims leave their nodes and the
pending pod (and a consolidation's movers) land where the plan's proof put them; the view
shows it once the actuator acts (in a replay, before the simulated scheduler's next decision:
``streams/simulation/sim_actuator.py``). A dry run changes nothing, so without this every
later plan saw the victims still bound and their room still taken, and chose the same cheapest
victim again (on the bundled trace one pod was the victim of 1,110 refused plans). Here each
admitted plan is counted as done in the planners' copy of the capacity (``Scratch``), never
in the view the detectors read, for the pod cooldown (``COOLDOWN_POD_S``, 3,600 s): the
window in which the gate would refuse the same victim anyway.

What is not rehearsed: where an evicted pod comes back (its controller recreates it and the
scheduler, not the plan, decides where; in a replay under the FGD protocol often nowhere), and
a quarantine's cordon (the searches already skip no node for a cordon of ours). So the
planning view of a dry run has at most the victims' room more than enforce's.

Event time only: an entry lasts until its instant plus the cooldown, dropped by
``forget_before``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from models import ResourceRequest
from streams.cluster.view import ClusterView
from streams.planners.plan import Plan
from streams.planners.trial_capacity import HOLDING, Scratch, cards_of

__all__ = ["Freed", "Landed", "Rehearsal", "Rehearsed"]


@dataclass(frozen=True, slots=True)
class Freed:
    """A victim the plan evicts: its room on its node counts as free."""

    pod: str
    node: str
    cards: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Landed:
    """A pod the plan's proof places: its request counts as taken on ``node``."""

    pod: str
    node: str
    requests: ResourceRequest


@dataclass(frozen=True, slots=True)
class Rehearsed:
    until: datetime
    freed: tuple[Freed, ...]
    landed: tuple[Landed, ...]


class Rehearsal:
    """The admitted plans of a dry run, as done, for their cooldown window."""

    def __init__(self) -> None:
        self.entries: list[Rehearsed] = []

    def forget_before(self, at: datetime) -> None:
        self.entries = [e for e in self.entries if e.until > at]

    def record(self, plan: Plan, view: ClusterView, *, at: datetime, span_s: float) -> None:
        """Count ``plan``, admitted at ``at``, as done until ``span_s`` later. Victims
        without a node or known cards free nothing the search could have counted."""
        if span_s <= 0 or not (plan.evictions or plan.lands):
            return
        freed = []
        for task in plan.evictions:
            cards = cards_of(view, task)
            if task.node is not None and cards is not None:
                freed.append(Freed(task.key, task.node, cards))
        landed = tuple(Landed(t.key, node, t.requests) for t, node in plan.lands)
        until = at + timedelta(seconds=span_s)
        self.entries.append(Rehearsed(until, tuple(freed), landed))

    def gone(self) -> frozenset[str]:
        """Pods a rehearsed plan evicted: never a candidate again in the window, even with
        the gate's pod cooldown set to 0 (its room is already counted as free)."""
        return frozenset(f.pod for e in self.entries for f in e.freed)

    def landed(self, pod: str) -> bool:
        """Whether a rehearsed plan placed ``pod``: enforce would not plan for it again."""
        return any(x.pod == pod for e in self.entries for x in e.landed)

    def apply(self, scratch: Scratch) -> None:
        """Count every rehearsed plan as done on ``scratch`` (a copy): victims' room freed,
        then landed pods' requests taken, oldest plan first, as enforce would have applied
        them. What the view already shows is not counted twice: a victim no longer bound on
        its node freed its room in the view itself, and a landed pod bound anywhere but
        where the plan evicts it from (a consolidation's mover still in place) takes its
        room there."""
        view, index = scratch.view, scratch.index
        for entry in self.entries:
            in_place = set()
            for f in entry.freed:
                task = view.tasks.get(f.pod)
                slot = index.slot.get(f.node)
                if task is None or task.node != f.node or task.phase not in HOLDING:
                    continue
                room = None if slot is None else scratch.room(slot)
                if room is not None:
                    room.without([(task, f.cards)]).write(scratch.free)
                    in_place.add(f.pod)
            for x in entry.landed:
                task = view.tasks.get(x.pod)
                slot = index.slot.get(x.node)
                bound = task is not None and task.node is not None and task.phase in HOLDING
                if bound and x.pod not in in_place:
                    continue
                room = None if slot is None else scratch.room(slot)
                if room is not None and room.fits(x.requests):
                    room.placed(x.requests).write(scratch.free)

    def to_json(self) -> list[object]:
        return [
            {
                "until": e.until.isoformat(),
                "freed": [[f.pod, f.node, list(f.cards)] for f in e.freed],
                "landed": [[x.pod, x.node, x.requests.model_dump(mode="json")] for x in e.landed],
            }
            for e in self.entries
        ]

    def restore(self, raw: object) -> None:
        entries = []
        for e in raw if isinstance(raw, list) else []:
            if not isinstance(e, dict):
                continue
            freed = tuple(
                Freed(str(pod), str(node), tuple(int(c) for c in cards))
                for pod, node, cards in e.get("freed", [])
            )
            landed = tuple(
                Landed(str(pod), str(node), ResourceRequest.model_validate(req))
                for pod, node, req in e.get("landed", [])
            )
            entries.append(Rehearsed(datetime.fromisoformat(str(e["until"])), freed, landed))
        self.entries = entries
