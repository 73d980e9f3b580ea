"""Event-time order for the cluster view, shared by both runners.

The analysis sees its input one instant at a time: every delta of an event time is applied,
then the analysis advances to that time, and nothing from a later time is applied before. Its
own deferred work (a pending-queue evaluation, a typical-pods rebuild) happens at the event time
it falls due. Together this makes the signals a function of the deltas and their event times
alone: the embedded runner (input already in order) and the Faust cluster view (deltas from many
partitions, released by a watermark) produce the same signals, however the deltas interleave on
the way.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from datetime import datetime
from typing import NamedTuple

from models import Signal
from streams.fragmentation.analysis import FragmentationAnalysis
from streams.profiles.join import NodeProfileUpdate, ProfileUpdate


class OrderKey(NamedTuple):
    """Where a delta sits in the source's order: the event that caused it (time, source, the
    source's sequence number, id), then which stage made it (``rank``: 0 the pod's, 1 a
    node's) and its position among that stage's outputs for the event (``sub``). Deltas of one
    key always keep their causes' order, which is all the analysis's result depends on."""

    at: datetime
    source: str
    seq: int
    id: str
    rank: int = 0
    sub: int = 0


def rank_of(update: ProfileUpdate) -> int:
    return 1 if isinstance(update, NodeProfileUpdate) else 0


OnInstant = Callable[[datetime, list[Signal]], None]


class InstantAnalysis:
    def __init__(self, analysis: FragmentationAnalysis) -> None:
        self.analysis = analysis
        self._heap: list[tuple[OrderKey, int, ProfileUpdate]] = []
        self._pushed = 0
        self.watermark: datetime | None = None
        """Every delta at or before this time has been applied."""
        self.late = 0
        """Deltas that came after the watermark had passed their time (applied on arrival)."""

    @property
    def buffered(self) -> int:
        return len(self._heap)

    def add(self, key: OrderKey, delta: ProfileUpdate) -> list[Signal]:
        """Hold a delta until its instant is released; one that is already late (its instant
        was evaluated) is applied at once, at the watermark, and counted."""
        wm = self.watermark
        if wm is not None and key.at <= wm:
            self.late += 1
            return self.analysis.apply(delta) + self.analysis.advance(wm)
        self._pushed += 1
        heapq.heappush(self._heap, (key, self._pushed, delta))
        return []

    def release(self, upto: datetime, *, on_instant: OnInstant | None = None) -> list[Signal]:
        """Apply and evaluate every instant up to and including ``upto``: the caller promises
        that no delta at or before it will come any more (a watermark)."""
        if self.watermark is not None and upto <= self.watermark:
            return []
        a = self.analysis
        out: list[Signal] = []
        heap = self._heap
        while heap and heap[0][0].at <= upto:
            t = heap[0][0].at
            out += self._timers(before=t, inclusive=False, on_instant=on_instant)
            signals: list[Signal] = []
            while heap and heap[0][0].at == t:
                _, _, delta = heapq.heappop(heap)
                signals += a.apply(delta)
            signals += a.advance(t)
            self._instant(t, signals, on_instant)
            out += signals
        out += self._timers(before=upto, inclusive=True, on_instant=on_instant)
        self.watermark = upto
        return out

    def _timers(
        self, *, before: datetime, inclusive: bool, on_instant: OnInstant | None
    ) -> list[Signal]:
        out: list[Signal] = []
        while True:
            due = self.analysis.next_due()
            if due is None or due > before or (due == before and not inclusive):
                return out
            if self.analysis.now is not None and due < self.analysis.now:
                due = self.analysis.now  # overdue (e.g. after late input): do it now
            signals = self.analysis.advance(due)
            self._instant(due, signals, on_instant)
            out += signals
            if self.analysis.next_due() == due:  # the work did not happen: never spin
                return out

    @staticmethod
    def _instant(at: datetime, signals: list[Signal], on_instant: OnInstant | None) -> None:
        if on_instant is not None:
            on_instant(at, signals)
