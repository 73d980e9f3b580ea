"""Changes gpufrag proposes or makes, each carrying the evidence that justified it (audit)."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import BeforeValidator, Field, JsonValue, model_validator

from models.base import Frozen, UtcDatetime
from models.signals import FINGERPRINT_PATTERN, Scope

__all__ = [
    "ACTION_KIND_PATTERN",
    "ANSWERED_BY_THE_CLUSTER",
    "Action",
    "ActionKind",
    "ActionKindName",
    "ActionMode",
    "ActionOutcome",
    "NoFix",
    "action_kind",
]


class ActionKind(StrEnum):
    """The product's own planners' kinds. An extension's planner names its own kind (any
    identifier, see ``ActionKindName``) without editing this enum."""

    RECLAIM = "reclaim"
    CONSOLIDATE = "consolidate"
    QUARANTINE = "quarantine"
    EVICT_AGGRESSOR = "evict_aggressor"


ACTION_KIND_PATTERN = r"^[a-z][a-z0-9_]{0,62}$"
"""An action kind: lower-case letters, digits and '_', as the store's ``kind`` column, the
metrics' labels and ``gpufrag actions --kind`` take it."""


def action_kind(value: object) -> object:
    """A built-in kind's name becomes its ``ActionKind`` member (so ``kind is
    ActionKind.RECLAIM`` holds after a round trip through JSON); any other string is left for
    the pattern to judge."""
    if isinstance(value, str) and not isinstance(value, ActionKind):
        try:
            return ActionKind(value)
        except ValueError:
            return value
    return value


ActionKindName = Annotated[
    ActionKind | Annotated[str, Field(pattern=ACTION_KIND_PATTERN)],
    BeforeValidator(action_kind),
]
"""Why an action was taken, in its planner's terms: a built-in ``ActionKind`` or an
extension's own kind name."""


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
    kind: ActionKindName
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


class NoFix(Frozen):
    """Why a planner found no plan for a pending pod: the guardrail that turned its candidates
    away, or the shortage that no search under the bounds can overcome. Stored on the pod's
    explanation row of the instant it was planned for (``pending_explanations.no_fix``), so
    `gpufrag explain` can say what stands between the pod and its fix."""

    planner: Annotated[str, Field(min_length=1)]
    """The planner that searched (``gate`` where the cluster-wide eviction limit was used up
    and no planner was asked)."""
    code: Annotated[str, Field(pattern=ACTION_KIND_PATTERN)]
    """A guardrail's rule (a ``GateRefusal`` code: ``protected_namespace``, ``exempt_pod``,
    ``priority_gap``, ``cooling_down``, ``rate_limited``) or a shortage (``no_node``,
    ``no_candidates``, ``too_little``, ``max_victims``, ``no_room_to_move``,
    ``search_budget``, ``request_shape``)."""
    guardrail: bool
    """``code`` is a guardrail's rule (else a shortage)."""
    text: str
    """The reason in words, with its figures."""
    pods: Annotated[int, Field(ge=0)] = 0
    """Candidate pods the rule turned away (0 for a shortage)."""
    nodes: Annotated[int, Field(ge=0)] = 0
    """Nodes the search visited: those that could host the pod were they emptied."""
