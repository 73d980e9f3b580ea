"""Detections: what analysis emits and alert sinks and reclaim policy consume."""

from __future__ import annotations

import hashlib
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import Field, JsonValue, model_validator

from models.base import Frozen, UtcDatetime

__all__ = [
    "FINGERPRINT_PATTERN",
    "KindName",
    "Scope",
    "Severity",
    "Signal",
    "SignalKind",
    "fingerprint_of",
]

FINGERPRINT_PATTERN = r"^[0-9a-f]{16}$"

KindName = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,62}$")]
"""A signal's kind: a built-in ``SignalKind`` or the name an extension's detector registered.
A word of lower-case letters, digits and '_': it is an alert's name, a runbook's path and a
``signals.kind`` value (a String column), so an extension needs no edit here."""


class SignalKind(StrEnum):
    """The kinds the product's own detectors emit (a ``Signal.kind`` holds the plain word)."""

    FRAGMENTATION = "fragmentation"
    UNPLACEABLE_PENDING = "unplaceable_pending"
    STRANDED_GPUS = "stranded_gpus"
    OOM_STORM = "oom_storm"
    GPU_UNHEALTHY = "gpu_unhealthy"
    NEAR_MEMORY_LIMIT = "near_memory_limit"
    IDLE_GPU = "idle_gpu"
    QUOTA_BORROWABLE = "quota_borrowable"
    QUOTA_LENDER_BLOCKED = "quota_lender_blocked"
    QUOTA_EXHAUSTED = "quota_exhausted"


class Scope(StrEnum):
    """What a signal (or action) is about; together with scope_id it names one thing."""

    CLUSTER = "cluster"
    POOL = "pool"
    NODE = "node"
    GPU = "gpu"
    QUEUE = "queue"
    NAMESPACE = "namespace"
    POD = "pod"


class Severity(StrEnum):
    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"


def fingerprint_of(kind: str, scope: Scope, scope_id: str, *parts: str) -> str:
    """Stable id of 'the same problem': equal inputs give equal fingerprints in any process
    (no hash() randomisation), so a signal reopened after a restart dedupes in sinks.
    Parts are joined with a separator that cannot occur in names, so ("a/b","c") != ("a","b/c")."""
    joined = "\x1f".join([str(kind), scope.value, scope_id, *parts])
    return hashlib.sha256(joined.encode()).hexdigest()[:16]


class Signal(Frozen):
    """A detection with a life: opened, later resolved, keyed by its fingerprint."""

    kind: KindName
    scope: Scope
    scope_id: str
    severity: Severity
    fingerprint: Annotated[str, Field(pattern=FINGERPRINT_PATTERN)]
    summary: str
    evidence: dict[str, JsonValue] = Field(default_factory=dict)
    opened_at: UtcDatetime
    resolved_at: UtcDatetime | None = None
    state: Literal["open", "resolved"] = "open"

    @model_validator(mode="after")
    def _state_matches_resolution(self) -> Signal:
        if (self.state == "resolved") != (self.resolved_at is not None):
            raise ValueError(
                f"state={self.state!r} inconsistent with resolved_at={self.resolved_at}: "
                "resolved_at is set exactly when state is 'resolved'"
            )
        if self.resolved_at is not None and self.resolved_at < self.opened_at:
            raise ValueError("resolved_at is before opened_at")
        return self

    def resolved(self, at: UtcDatetime) -> Signal:
        """The same signal, resolved at `at` (validated, unlike model_copy)."""
        return Signal.model_validate({**dict(self), "resolved_at": at, "state": "resolved"})
