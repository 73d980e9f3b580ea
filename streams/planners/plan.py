"""What a planner proposes: one change to the cluster with its reason and its proof.

A plan is not yet an action: the gate may refuse it, and it becomes one audit record per
eviction or node change (``acting.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

from pydantic import JsonValue

from models import Signal, TaskProfile
from models.actions import ActionKindName, NoFix
from streams.cluster.view import ClusterView

__all__ = ["NoFix", "NodeOp", "Plan", "Planner", "StatefulPlanner", "SubjectPlanner"]

NodeOp = Literal["cordon", "taint", "uncordon", "untaint"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    kind: ActionKindName
    """A built-in ``ActionKind``, or an extension's own kind name: it is the audit records'
    ``kind`` and what ``gpufrag actions --kind`` selects."""
    signal: Signal
    reason: str
    evictions: tuple[TaskProfile, ...] = ()
    node: str | None = None
    node_ops: tuple[NodeOp, ...] = ()
    beneficiary: str | None = None
    """The pod or gang the plan makes room for (None: nobody's, e.g. a quarantine)."""
    beneficiary_priority: int | None = None
    """Set where the plan preempts, so the gate checks the priority gap (a consolidation
    moves pods rather than ending them, and leaves it None)."""
    evidence: dict[str, JsonValue] = field(default_factory=dict)
    lands: tuple[tuple[TaskProfile, str], ...] = ()
    """Pods the plan's proof places once it is done, each with its node (the pending pod; a
    consolidation's movers too): what a dry run counts as taken while it rehearses the plan
    (``rehearsal.py``). Empty: the plan places nothing that it can name."""


class Planner(Protocol):
    """One extension point, one method: a signal that changed, the view, maybe a plan. A
    planner that searched and found none may say why (``NoFix``: the guardrail or the
    shortage that stops it), which `gpufrag explain` shows for the pod; ``None`` says
    nothing (the signal is not one it plans for, or it needs no plan)."""

    name: str

    def plan(self, signal: Signal, view: ClusterView) -> Plan | NoFix | None: ...


@runtime_checkable
class StatefulPlanner(Planner, Protocol):
    """A planner that remembers between signals (quarantine: which faults hold a node).
    ``Acting`` keeps its state under the planner's name, so a restarted worker lifts what it
    quarantined before."""

    def snapshot(self) -> object:
        """Its state as JSON-ready values."""
        ...

    def restore(self, raw: object) -> None:
        """Take back what ``snapshot`` gave, as JSON read it back."""
        ...


@runtime_checkable
class SubjectPlanner(Planner, Protocol):
    """A planner whose signal names something other than the pod it plans for: a full
    queue's ``quota_exhausted`` names the queue, the plan is for a pod it holds. ``Acting``
    keeps such a planner's ``NoFix`` on that pod's explanation (a signal's scope otherwise)."""

    def subject(self, signal: Signal, view: ClusterView) -> str | None:
        """The pod (or gang) key it plans for on ``signal``; None: nobody."""
        ...
