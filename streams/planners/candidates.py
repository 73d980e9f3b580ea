"""Which pods a planner may move or evict, in the order it prefers them.

The gate still checks every action; these filters only keep a planner from building a plan
the gate would refuse for a reason no search can change (a protected namespace, the exempt
label, a priority too close). The first two are the gate's own judgement
(``streams.guardrails.gate.never_evicted``), asked here, not restated.
"""

from __future__ import annotations

from dataclasses import dataclass

from models import TaskProfile
from models.settings import GuardrailSettings
from streams.cluster.queues import QueueView, queue_view, task_amounts
from streams.cluster.view import ClusterView
from streams.guardrails.gate import never_evicted
from streams.planners.trial_capacity import HOLDING, cards_of

__all__ = ["Held", "HeldCache", "evictable", "held_on", "quotas_of"]


@dataclass(frozen=True, slots=True)
class Held:
    """A pod bound to a node, with the cards it holds."""

    task: TaskProfile
    cards: tuple[int, ...]
    borrower: bool
    """Its queue uses more than its guaranteed quota: evicting it first gives back what
    was borrowed."""

    @property
    def key(self) -> str:
        return self.task.key


def evictable(task: TaskProfile, guardrails: GuardrailSettings) -> bool:
    """Whether the gate could ever let ``task`` be evicted (limits and cooldowns aside)."""
    return never_evicted(guardrails, pod=task.key, labels=task.labels) is None


def _borrowing(quotas: QueueView | None, task: TaskProfile) -> bool:
    if quotas is None:
        return False
    key = quotas.queue_of.get((task.key.split("/", 1)[0], task.queue or ""))
    if key is None:
        return False
    borrowed = quotas.queues[key].borrowed
    return any(r in borrowed for r in task_amounts(task))


def quotas_of(view: ClusterView) -> QueueView | None:
    return queue_view(view.queues, view.tally) if view.queues else None


class HeldCache:
    """Each node's held pods, kept while its profile is the same object: profiles are
    immutable and replaced on every change, and a pod's binding, requests, priority and
    labels (all a search reads) change only with its node's profile. Planning for one signal
    walks every node, so without it each plan would rebuild a thousand lists."""

    def __init__(self) -> None:
        self.entries: dict[str, tuple[object, list[Held]]] = {}

    def get(self, view: ClusterView, node: str) -> list[Held]:
        profile = view.nodes.get(node)
        if profile is None:
            self.entries.pop(node, None)
            return []
        hit = self.entries.get(node)
        if hit is not None and hit[0] is profile:
            return hit[1]
        held = _held(view, node, None)
        self.entries[node] = (profile, held)
        return held


def held_on(
    view: ClusterView,
    node: str,
    *,
    quotas: QueueView | None,
    skip: frozenset[str] = frozenset(),
    cache: HeldCache | None = None,
) -> list[Held]:
    """The pods on ``node`` a search may weigh: bound, still holding their resources, with
    known cards."""
    if cache is not None and quotas is None:
        held = cache.get(view, node)
    else:
        held = _held(view, node, quotas)
    return [h for h in held if h.key not in skip] if skip else held


def _held(view: ClusterView, node: str, quotas: QueueView | None) -> list[Held]:
    profile = view.nodes.get(node)
    if profile is None:
        return []
    out = []
    for key in profile.pods:
        task = view.tasks.get(key)
        if task is None or task.node != node or task.phase not in HOLDING:
            continue
        cards = cards_of(view, task)
        if cards is None:
            continue
        out.append(Held(task, cards, _borrowing(quotas, task)))
    return out
