"""Changes gpufrag proposes or makes, each carrying the evidence that justified it (audit)."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import Field, JsonValue, model_validator

from models.base import Frozen, UtcDatetime
from models.signals import FINGERPRINT_PATTERN, Scope

__all__ = ["ANSWERED_BY_THE_CLUSTER", "Action", "ActionKind", "ActionMode", "ActionOutcome"]


class ActionKind(StrEnum):
    RECLAIM = "reclaim"
    CONSOLIDATE = "consolidate"
    QUARANTINE = "quarantine"
    EVICT_AGGRESSOR = "evict_aggressor"


class ActionMode(StrEnum):
    """dry_run is the default everywhere: enforcing is an explicit opt-in."""

    DRY_RUN = "dry_run"
    ENFORCE = "enforce"


class ActionOutcome(StrEnum):
    PROPOSED = "proposed"
    EXECUTED = "executed"
    REFUSED = "refused"
    FAILED = "failed"
    BLOCKED = "blocked"
    """The cluster said no and must not be overruled: an eviction a PodDisruptionBudget
    refused (HTTP 429). Never forced; a planner may ask again later under a new id."""
    GONE = "gone"
    """The target no longer exists (HTTP 404, or another pod now has the name): nothing to do."""


ANSWERED_BY_THE_CLUSTER = frozenset(
    {ActionOutcome.EXECUTED, ActionOutcome.BLOCKED, ActionOutcome.GONE}
)
"""Outcomes only an API call can give, so a dry run can never record one."""


class Action(Frozen):
    """One audit record. `refused` (e.g. protected namespace, rate limit) is recorded too, so
    the trail shows what gpufrag would have done and why it did not."""

    id: Annotated[str, Field(min_length=1)]
    kind: ActionKind
    mode: ActionMode = ActionMode.DRY_RUN
    outcome: ActionOutcome
    target_scope: Scope
    target: Annotated[str, Field(min_length=1)]
    signal_fingerprint: Annotated[str, Field(pattern=FINGERPRINT_PATTERN)] | None = None
    reason: str
    evidence: dict[str, JsonValue] = Field(default_factory=dict)
    created_at: UtcDatetime

    @model_validator(mode="after")
    def _dry_run_never_executes(self) -> Action:
        if self.mode is ActionMode.DRY_RUN and self.outcome in ANSWERED_BY_THE_CLUSTER:
            raise ValueError(
                f"outcome={self.outcome.value!r} is impossible with mode='dry_run': "
                "only an API call can give it"
            )
        return self
