"""What a planner proposes: one change to the cluster with its reason and its proof.

A plan is not yet an action: the gate may refuse it, and it becomes one audit record per
eviction or node change (``acting.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol

from pydantic import JsonValue

from models import ActionKind, Signal, TaskProfile
from streams.cluster.view import ClusterView

__all__ = ["NodeOp", "Plan", "Planner"]

NodeOp = Literal["cordon", "taint", "uncordon", "untaint"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    kind: ActionKind
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


class Planner(Protocol):
    """One extension point, one method: a signal that changed, the view, maybe a plan."""

    name: str

    def plan(self, signal: Signal, view: ClusterView) -> Plan | None: ...
