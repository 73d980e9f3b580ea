"""The signal book: which signals are open, and the one way to open or resolve one.

Every detector opens and resolves through it, so fingerprints, the "opened once until resolved"
rule and the resolution time (never before the opening) are the same for all of them.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from functools import lru_cache

from models import Scope, Severity, Signal, fingerprint_of

FINGERPRINTS_KEPT = 65_536
"""Fingerprints remembered (each a sha256), least recently used dropped first: the stranded
check asks for one per node change and per node at a typical-pods rebuild, the pending check
one per pod that leaves the queue (a replay asks for 45,000, mostly the same ones)."""

_fingerprint = lru_cache(maxsize=FINGERPRINTS_KEPT)(fingerprint_of)


class SignalBook:
    def __init__(self, *, clock: Callable[[], datetime | None]) -> None:
        self._clock = clock
        self._open: dict[str, Signal] = {}
        self.tally: dict[tuple[str, str], int] = {}
        """Open signals by (kind, severity), kept with ``open`` for a report's gauges."""
        self.dirty: set[str] = set()
        """Fingerprints opened or resolved since the last snapshot (when ``tracking``)."""
        self.tracking = False

    @property
    def open(self) -> dict[str, Signal]:
        """Open signals by fingerprint; change it only through this book (or assign it whole,
        as a restore does, and the tally follows)."""
        return self._open

    @open.setter
    def open(self, signals: dict[str, Signal]) -> None:
        self._open = signals
        self.tally = {}
        for sig in signals.values():
            self._count(sig, 1)

    def _count(self, sig: Signal, sign: int) -> None:
        key = (str(sig.kind), str(sig.severity))
        n = self.tally.get(key, 0) + sign
        if n:
            self.tally[key] = n
        else:
            del self.tally[key]

    def opened(
        self,
        kind: str,
        scope: Scope,
        scope_id: str,
        *,
        severity: Severity,
        summary: str,
        evidence: dict[str, object],
    ) -> list[Signal]:
        """Open the signal unless it is open already; returns what changed."""
        fp = _fingerprint(kind, scope, scope_id)
        at = self._clock()
        if fp in self.open or at is None:
            return []
        sig = Signal.model_validate(
            {
                "kind": kind,
                "scope": scope,
                "scope_id": scope_id,
                "severity": severity,
                "fingerprint": fp,
                "summary": summary,
                "evidence": evidence,
                "opened_at": at,
                "resolved_at": None,
                "state": "open",
            }
        )
        self._open[fp] = sig
        self._count(sig, 1)
        if self.tracking:
            self.dirty.add(fp)
        return [sig]

    def resolved(self, kind: str, scope: Scope, scope_id: str) -> list[Signal]:
        return self.resolve_fingerprint(_fingerprint(kind, scope, scope_id))

    def resolve_fingerprint(self, fp: str) -> list[Signal]:
        sig = self._open.pop(fp, None)
        if sig is not None:
            self._count(sig, -1)
        now = self._clock()
        if sig is None or now is None:
            return []
        if self.tracking:
            self.dirty.add(fp)
        return [sig.resolved(max(now, sig.opened_at))]

    def is_open(self, kind: str, scope: Scope, scope_id: str) -> bool:
        return _fingerprint(kind, scope, scope_id) in self.open
