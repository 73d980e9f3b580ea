"""Changes gpufrag proposes or makes, each carrying the evidence that justified it (audit)."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import Field, JsonValue, model_validator

from models.base import Frozen, UtcDatetime
from models.signals import FINGERPRINT_PATTERN, Scope

__all__ = ["Action", "ActionKind", "ActionMode", "ActionOutcome"]


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
        if self.mode is ActionMode.DRY_RUN and self.outcome is ActionOutcome.EXECUTED:
            raise ValueError("outcome='executed' is impossible with mode='dry_run'")
        return self
