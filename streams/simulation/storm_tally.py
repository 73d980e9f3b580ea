"""Injected OOM storms matched with the storm signals a replay opened: found, missed, false.

A signal matches an incident when its scope is one of the incident's (its card, its node, its
namespace) and it opened between the incident's pods appearing and its last kill plus the
longest window. One incident may open a signal on each of its three scopes; it is found once,
and none of those signals is a false positive. A storm signal that matches no incident is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from models import Signal, SignalKind
from models.settings import OomStormSettings
from streams.simulation.incidents import InjectedStorm


@dataclass(frozen=True, slots=True)
class StormCounts:
    injected: int
    found: int
    false_positive: int

    def as_summary(self) -> dict[str, int]:
        return {
            "storms_injected": self.injected,
            "storms_found": self.found,
            "storms_false_positive": self.false_positive,
        }


@dataclass(slots=True)
class StormTally:
    """Keeps the storm signals as they open (``observe``), matches them when asked."""

    settings: OomStormSettings
    opened: list[Signal] = field(default_factory=list)

    def observe(self, signal: Signal) -> None:
        if signal.kind == SignalKind.OOM_STORM and signal.state == "open":
            self.opened.append(signal)

    def counts(self, storms: list[InjectedStorm]) -> StormCounts:
        s = self.settings
        late = timedelta(seconds=max(s.card_window_s, s.node_window_s, s.namespace_window_s))
        found: set[int] = set()
        false_positive = 0
        for signal in self.opened:
            hits = [
                i
                for i, storm in enumerate(storms)
                if (signal.scope, signal.scope_id) in storm.scopes()
                and storm.appeared <= signal.opened_at <= storm.last_kill + late
            ]
            found.update(hits)
            false_positive += 0 if hits else 1
        return StormCounts(len(storms), len(found), false_positive)
