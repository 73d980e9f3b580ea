"""What a planner asks the actuator to do: one typed request per change to the cluster.

Requests live in ``models`` so that planners (which import only models) can build them and
the actuator (a connector) can carry them out; each becomes one ``Action`` audit record.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, JsonValue, field_validator

from models.actions import ActionKindName, ActionMode
from models.base import Frozen
from models.signals import FINGERPRINT_PATTERN, Scope

__all__ = [
    "ACTUATOR_EVIDENCE_KEY",
    "OUR_PREFIX",
    "QUARANTINE_TAINT",
    "REQUEST_TYPES",
    "ActionRequest",
    "CordonNode",
    "EvictPod",
    "TaintNode",
    "UncordonNode",
    "UntaintNode",
]

OUR_PREFIX = "gpufrag.io/"
"""Taint keys and annotations gpufrag writes start with this: lifting a taint removes only
ours, and an uncordon lifts only a cordon we marked."""
QUARANTINE_TAINT = f"{OUR_PREFIX}quarantine"
ACTUATOR_EVIDENCE_KEY = "actuator"
"""The evidence key under which the actuator adds what it did (operation, HTTP status,
attempts, answer); a request's own evidence may not use it."""

Effect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]
_Name = Annotated[str, Field(min_length=1, max_length=253)]


class _Request(Frozen):
    id: Annotated[str, Field(min_length=1, max_length=256)]
    """The action id: the actuator acts at most once per id (see README, "Actuator")."""
    kind: ActionKindName
    """Why, in the planner's terms (reclaim, quarantine, ...); the request type says how."""
    mode: ActionMode = ActionMode.DRY_RUN
    """What the planner asks for; a dry-run actuator records enforce requests as proposals."""
    signal_fingerprint: Annotated[str, Field(pattern=FINGERPRINT_PATTERN)] | None = None
    """The signal that caused it."""
    reason: str
    evidence: dict[str, JsonValue] = Field(default_factory=dict)

    @field_validator("evidence")
    @classmethod
    def _evidence_leaves_room(cls, value: dict[str, JsonValue]) -> dict[str, JsonValue]:
        if ACTUATOR_EVIDENCE_KEY in value:
            raise ValueError(f"the key {ACTUATOR_EVIDENCE_KEY!r} is the actuator's own")
        return value


class EvictPod(_Request):
    """Evict through the Eviction API (policy/v1), so PodDisruptionBudgets hold."""

    op: Literal["evict"] = "evict"
    namespace: _Name
    name: _Name
    uid: str | None = None
    """Evict only this incarnation: a pod recreated under the same name (another uid) is left
    alone and the action reads as gone."""
    grace_period_s: Annotated[int, Field(ge=0)] | None = None
    """None: the pod's own terminationGracePeriodSeconds."""

    @property
    def target_scope(self) -> Scope:
        return Scope.POD

    @property
    def target(self) -> str:
        return f"{self.namespace}/{self.name}"


class _NodeRequest(_Request):
    node: _Name

    @property
    def target_scope(self) -> Scope:
        return Scope.NODE

    @property
    def target(self) -> str:
        return self.node


class CordonNode(_NodeRequest):
    """Mark the node unschedulable, and mark the cordon ours (an annotation) unless the node
    was cordoned already, so that lifting ours never lifts someone else's."""

    op: Literal["cordon"] = "cordon"


class UncordonNode(_NodeRequest):
    """Lift a cordon gpufrag made; one it did not make is left (refused)."""

    op: Literal["uncordon"] = "uncordon"


class _OurTaint(_NodeRequest):
    key: str = QUARANTINE_TAINT

    @field_validator("key")
    @classmethod
    def _ours(cls, value: str) -> str:
        if not value.startswith(OUR_PREFIX) or len(value) == len(OUR_PREFIX):
            raise ValueError(f"taint keys gpufrag manages start with {OUR_PREFIX!r}")
        return value


class TaintNode(_OurTaint):
    """Add (or update) our taint; every other taint on the node is kept."""

    op: Literal["taint"] = "taint"
    value: str = ""
    effect: Effect = "NoSchedule"


class UntaintNode(_OurTaint):
    """Remove our taint with this key (and effect, when given); others are kept."""

    op: Literal["untaint"] = "untaint"
    effect: Effect | None = None


ActionRequest = Annotated[
    EvictPod | CordonNode | UncordonNode | TaintNode | UntaintNode, Field(discriminator="op")
]

REQUEST_TYPES = (EvictPod, CordonNode, UncordonNode, TaintNode, UntaintNode)
"""For ``isinstance``: a host tells requests for the actuator from other outputs."""
