"""Evict-aggressor: end an OOM storm by evicting the pod that grew into its neighbours'
memory, only when it ranks below every pod it is killing (otherwise a human decides)."""

from __future__ import annotations

from models import ActionKind, Signal, SignalKind
from models.settings import GuardrailSettings
from streams.cluster.view import ClusterView
from streams.planners.candidates import evictable
from streams.planners.plan import Plan
from streams.planners.planner_registry import PlannerInputs, register_planner

__all__ = ["EvictAggressor"]


class EvictAggressor:
    name = "evict_aggressor"

    def __init__(self, *, guardrails: GuardrailSettings) -> None:
        self.guardrails = guardrails

    @classmethod
    def of(cls, inputs: PlannerInputs) -> EvictAggressor:
        """The registry's builder."""
        return cls(guardrails=inputs.guardrails)

    def plan(self, signal: Signal, view: ClusterView) -> Plan | None:
        if signal.kind != SignalKind.OOM_STORM or signal.state != "open":
            return None
        aggressor = signal.evidence.get("aggressor")
        victims = signal.evidence.get("victims")
        if not isinstance(aggressor, str) or not isinstance(victims, list):
            return None
        task = view.tasks.get(aggressor)
        known = [view.tasks[v] for v in victims if isinstance(v, str) and v in view.tasks]
        if task is None or task.node is None or not known or not evictable(task, self.guardrails):
            return None
        lowest = min(v.priority for v in known)
        if task.priority >= lowest:
            return None
        return Plan(
            kind=ActionKind.EVICT_AGGRESSOR,
            signal=signal,
            reason=(
                f"evict {aggressor} (priority {task.priority}): suspected aggressor of an OOM "
                f"storm killing {len(known)} pod(s) of priority {lowest} or more"
            ),
            evictions=(task,),
            beneficiary=signal.scope_id,
            beneficiary_priority=lowest,
            evidence={
                "aggressor": aggressor,
                "aggressor_priority": task.priority,
                "aggressor_growth_mib": signal.evidence.get("aggressor_growth_mib"),
                "victims": [v.key for v in known],
                "lowest_victim_priority": lowest,
            },
        )


register_planner("evict_aggressor", EvictAggressor.of, answers=[SignalKind.OOM_STORM])
