"""What the gate remembers, in event time: evictions admitted per window, cooldowns, failures
and the circuit breaker. No clock: every call says when it happens, so a replay and a live
cluster decide alike, and the state snapshots to JSON for a restarted host.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

__all__ = ["Eviction", "Ledger"]


@dataclass(frozen=True, slots=True)
class Eviction:
    at: datetime
    node: str | None
    namespace: str | None


@dataclass(frozen=True, slots=True)
class _Counts:
    by_node: Counter[str | None]
    by_namespace: Counter[str | None]

    @classmethod
    def of(cls, evictions: Iterable[Eviction]) -> _Counts:
        return cls(Counter(e.node for e in evictions), Counter(e.namespace for e in evictions))


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
    version: int = field(default=0, compare=False)
    """Bumped whenever what the gate's filters read (evictions, cooldowns) changes: a reader
    that keeps answers (``GatePreview``) knows they still hold while it is the same. So the
    two are changed only through ``add_eviction``, ``cool`` and ``forget_before``."""
    _counts: _Counts | None = field(default=None, compare=False, repr=False)

    def add_eviction(self, eviction: Eviction) -> None:
        self.evictions.append(eviction)
        self._changed()

    def cool(self, key: str, until: datetime) -> None:
        self.cooldowns[key] = until
        self._changed()

    def forget_before(self, at: datetime) -> None:
        """Drop what no longer counts at ``at``: keeps the state as small as a window."""
        keep = at - timedelta(seconds=self.window_s)
        changed = False
        while self.evictions and self.evictions[0].at <= keep:
            self.evictions.popleft()
            changed = True
        while self.failures and self.failures[0] <= keep:
            self.failures.popleft()
        expired = [k for k, until in self.cooldowns.items() if until <= at]
        for key in expired:
            del self.cooldowns[key]
        if changed or expired:
            self._changed()
        if self.breaker_until is not None and self.breaker_until <= at:
            self.breaker_until, self.breaker_why = None, ""

    def count(self, *, node: str | None = None, namespace: str | None = None) -> int:
        """Evictions in the window, of ``node`` or ``namespace`` when given. Counted once per
        change: the gate asks three counts per candidate, and a search asks about thousands
        of candidates at one instant (2.4 million questions in an enforced replay of the
        bundled trace, each a scan of the window)."""
        if node is None and namespace is None:
            return len(self.evictions)
        if node is not None and namespace is not None:
            return sum(1 for e in self.evictions if e.node == node and e.namespace == namespace)
        counts = self._counts
        if counts is None:
            counts = self._counts = _Counts.of(self.evictions)
        return counts.by_node[node] if node is not None else counts.by_namespace[namespace]

    def _changed(self) -> None:
        self.version += 1
        self._counts = None

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
