"""Why the gate refused or held back an action, one type per limit (the descheduler's evictor
returns typed errors the same way): the audit trail and the metrics name the limit, not a
sentence."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

__all__ = [
    "BreakerOpen",
    "CoolingDown",
    "ExemptPod",
    "GateRefusal",
    "ModeOff",
    "PriorityGapTooSmall",
    "ProtectedNamespace",
    "RateLimited",
]


@dataclass(frozen=True, slots=True)
class GateRefusal:
    code: str = "refused"

    def text(self) -> str:
        return self.code


@dataclass(frozen=True, slots=True)
class ModeOff(GateRefusal):
    code: str = "mode_off"

    def text(self) -> str:
        return "guardrails mode is off: no action is taken or proposed"


@dataclass(frozen=True, slots=True)
class ProtectedNamespace(GateRefusal):
    namespace: str = ""
    code: str = "protected_namespace"

    def text(self) -> str:
        return f"namespace {self.namespace} is protected"


@dataclass(frozen=True, slots=True)
class ExemptPod(GateRefusal):
    label: str = ""
    code: str = "exempt_pod"

    def text(self) -> str:
        return f"the pod carries {self.label}"


@dataclass(frozen=True, slots=True)
class PriorityGapTooSmall(GateRefusal):
    victim: int = 0
    beneficiary: int = 0
    needed: int = 0
    code: str = "priority_gap"

    def text(self) -> str:
        return (
            f"victim priority {self.victim} is not {self.needed} below the pod it makes room "
            f"for ({self.beneficiary})"
        )


@dataclass(frozen=True, slots=True)
class RateLimited(GateRefusal):
    scope: str = ""
    """cluster, node:<name> or namespace:<name>."""
    limit: int = 0
    window_s: float = 0.0
    code: str = "rate_limited"

    def text(self) -> str:
        return f"{self.scope} had {self.limit} evictions in {self.window_s:.0f} s already"


@dataclass(frozen=True, slots=True)
class CoolingDown(GateRefusal):
    scope: str = ""
    """pod:<key>, node:<name> or job:<name>."""
    until: datetime | None = None
    code: str = "cooling_down"

    def text(self) -> str:
        when = self.until.isoformat() if self.until else "?"
        return f"{self.scope} was acted on recently; cooling down until {when}"


@dataclass(frozen=True, slots=True)
class BreakerOpen(GateRefusal):
    until: datetime | None = None
    why: str = ""
    code: str = "breaker_open"

    def text(self) -> str:
        when = self.until.isoformat() if self.until else "?"
        return f"enforcement stopped until {when}: {self.why}"
