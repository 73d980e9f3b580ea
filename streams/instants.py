"""Event-time instants for an operator, shared by both runners.

The operator sees its input one instant at a time: every item of an event time is applied, then
the operator advances to that time, and nothing from a later time is applied before. Its own
deferred work (``next_due``: a pending-queue evaluation, a typical-pods rebuild) happens at the
event time it falls due. Together this makes its outputs a function of the items and their event
times alone: the embedded runner (input already in order) and the Faust cluster view (deltas from
many partitions, released by a watermark) produce the same signals, however the deltas
interleave on the way.
"""

from __future__ import annotations

import heapq
import zlib
from collections.abc import Callable
from datetime import datetime
from typing import Any, Generic, NamedTuple, TypeVar

from streams.operator import Operator


class OrderKey(NamedTuple):
    """Where a delta sits in the source's order: the event that caused it (time, the
    publisher's sequence number, source, id), then which stage made it (``rank``: 0 the pod's,
    1 a node's) and its position among that stage's outputs for the event (``sub``). Deltas of
    one key always keep their causes' order, which is all the analysis's result depends on.

    The sequence number comes before the source name: one publisher (a replay with injected
    incidents) sends events of several sources, and within an instant they must keep the order
    it sent them in, which is the order the embedded runner's join saw them in. Ordered by
    source first, an injected pod bound at the instant a trace node appeared was applied before
    the node, and the view kept the node's empty profile for 50 s of event time."""

    at: datetime
    seq: int
    source: str
    id: str
    rank: int = 0
    sub: int = 0

    def row_seq(self) -> int:
        """The delta's place within its instant as one number, the profile tables' ``seq``:
        both runners give a delta the same key, so a delta a restarted worker sends again
        lands on the row it wrote before.

        Bits, high to low: 42 of the publisher's sequence (4.4e12 events; a larger one wraps),
        8 of a hash of the event id, 2 of the stage's rank, 12 of the position among its
        outputs (4,096). The id's byte keeps apart same-instant events of publishers that
        number alike (`gpufrag watch` runs one per source, each from 0; late and foreign
        events carry none): two such events on one node share a row only 1 time in 256."""
        seq = self.seq & (2**42 - 1)
        tag = zlib.crc32(self.id.encode()) & 0xFF
        return (seq << 22) | (tag << 14) | ((self.rank & 3) << 12) | min(self.sub, 4095)


In = TypeVar("In")
Out = TypeVar("Out")


class Instants(Generic[In, Out]):
    """Holds an operator's input until its instant is released, then applies and advances."""

    def __init__(self, op: Operator[In, Out]) -> None:
        self.op = op
        self._heap: list[tuple[OrderKey, int, Any]] = []
        self._pushed = 0
        self.watermark: datetime | None = None
        """Every delta at or before this time has been applied."""
        self.late = 0
        """Deltas that came after the watermark had passed their time (applied on arrival)."""

    @property
    def buffered(self) -> int:
        return len(self._heap)

    def add(self, key: OrderKey, item: In) -> list[Out]:
        """Hold an item until its instant is released; one that is already late (its instant
        was evaluated) is applied at once, at the watermark, and counted."""
        wm = self.watermark
        if wm is not None and key.at <= wm:
            self.late += 1
            return [*self.op.apply(item), *self.op.advance(wm)]
        self._pushed += 1
        heapq.heappush(self._heap, (key, self._pushed, item))
        return []

    def release(
        self, upto: datetime, *, on_instant: Callable[[datetime, list[Out]], None] | None = None
    ) -> list[Out]:
        """Apply and advance every instant up to and including ``upto``: the caller promises
        that no item at or before it will come any more (a watermark). ``on_instant`` hears
        each instant the operator advanced to, with what that instant produced."""
        if self.watermark is not None and upto <= self.watermark:
            return []
        op = self.op
        out: list[Out] = []
        heap = self._heap
        while heap and heap[0][0].at <= upto:
            t = heap[0][0].at
            out += self._timers(before=t, inclusive=False, on_instant=on_instant)
            produced: list[Out] = []
            while heap and heap[0][0].at == t:
                _, _, item = heapq.heappop(heap)
                produced += op.apply(item)
            produced += op.advance(t)
            if on_instant is not None:
                on_instant(t, produced)
            out += produced
        out += self._timers(before=upto, inclusive=True, on_instant=on_instant)
        self.watermark = upto
        return out

    def _timers(
        self,
        *,
        before: datetime,
        inclusive: bool,
        on_instant: Callable[[datetime, list[Out]], None] | None,
    ) -> list[Out]:
        op = self.op
        out: list[Out] = []
        while True:
            due = op.next_due()
            if due is None or due > before or (due == before and not inclusive):
                return out
            if op.now is not None and due < op.now:
                due = op.now  # overdue (e.g. after late input): do it now
            produced = list(op.advance(due))
            if on_instant is not None:
                on_instant(due, produced)
            out += produced
            if op.next_due() == due:  # the work did not happen: never spin
                return out
