"""What the gate remembers, in event time: evictions admitted per window, cooldowns, failures
and the circuit breaker. No clock: every call says when it happens, so a replay and a live
cluster decide alike, and the state snapshots to JSON for a restarted host.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timedelta

__all__ = ["Eviction", "Ledger"]


@dataclass(frozen=True, slots=True)
class Eviction:
    at: datetime
    node: str | None
    namespace: str | None


@dataclass(slots=True)
class Ledger:
    window_s: float
    evictions: deque[Eviction] = field(default_factory=deque)
    cooldowns: dict[str, datetime] = field(default_factory=dict)
    """pod:<key>, node:<name>, job:<name> -> until when it is left alone."""
    failures: deque[datetime] = field(default_factory=deque)
    acted_on_signal: dict[str, int] = field(default_factory=dict)
    """Signal fingerprint -> actions carried out for it while it stayed open."""
    breaker_until: datetime | None = None
    breaker_why: str = ""

    def forget_before(self, at: datetime) -> None:
        """Drop what no longer counts at ``at``: keeps the state as small as a window."""
        keep = at - timedelta(seconds=self.window_s)
        while self.evictions and self.evictions[0].at <= keep:
            self.evictions.popleft()
        while self.failures and self.failures[0] <= keep:
            self.failures.popleft()
        for key in [k for k, until in self.cooldowns.items() if until <= at]:
            del self.cooldowns[key]
        if self.breaker_until is not None and self.breaker_until <= at:
            self.breaker_until, self.breaker_why = None, ""

    def count(self, *, node: str | None = None, namespace: str | None = None) -> int:
        return sum(
            1
            for e in self.evictions
            if (node is None or e.node == node) and (namespace is None or e.namespace == namespace)
        )

    def to_json(self) -> dict[str, object]:
        return {
            "evictions": [[e.at.isoformat(), e.node, e.namespace] for e in self.evictions],
            "cooldowns": {k: v.isoformat() for k, v in sorted(self.cooldowns.items())},
            "failures": [f.isoformat() for f in self.failures],
            "acted_on_signal": dict(sorted(self.acted_on_signal.items())),
            "breaker": [
                None if self.breaker_until is None else self.breaker_until.isoformat(),
                self.breaker_why,
            ],
        }

    @classmethod
    def from_json(cls, raw: dict[str, object], *, window_s: float) -> Ledger:
        def when(v: object) -> datetime:
            return datetime.fromisoformat(str(v))

        evictions = raw.get("evictions")
        cooldowns = raw.get("cooldowns")
        cooling = cooldowns if isinstance(cooldowns, dict) else {}
        failures = raw.get("failures")
        acted = raw.get("acted_on_signal")
        breaker = raw.get("breaker")
        until, why = breaker if isinstance(breaker, list) else (None, "")
        return cls(
            window_s=window_s,
            evictions=deque(
                Eviction(when(a), None if n is None else str(n), None if s is None else str(s))
                for a, n, s in (evictions if isinstance(evictions, list) else [])
            ),
            cooldowns={str(k): when(v) for k, v in cooling.items()},
            failures=deque(when(f) for f in (failures if isinstance(failures, list) else [])),
            acted_on_signal={
                str(k): int(v) for k, v in (acted if isinstance(acted, dict) else {}).items()
            },
            breaker_until=None if until is None else when(until),
            breaker_why=str(why or ""),
        )
