"""Putting a stage partition's input back in event-time order.

A stage partition reads several topic partitions (pods and scheduler events; nodes, GPU samples
and bindings from every pod partition; deltas from every stage), each written by one or more
sources that report their progress (``models.progress.SourceProgress``). Items wait in a heap
until every source the partition hears from has reported progress past them; then they are
released in ``OrderKey`` order, which is the order the embedded runner processes them in.

Sources are of two sorts: the publishers and watchers outside (learned from their progress
reports, with the kinds they publish), and the upstream stage partitions (fixed: the node stage
waits for every pod partition, the cluster view for every stage partition). An outside source
that falls more than ``max_source_lag_s`` of event time behind the most advanced one (a watcher
that was stopped for good) no longer holds the others back; its later events count as late.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Generic, TypeVar

import orjson

from models import EventKind
from models.progress import SourceProgress
from streams.instants import OrderKey

T = TypeVar("T")


@dataclass(slots=True)
class Watermarks:
    """The event time up to which every source of one stage partition is complete."""

    topic_of_kind: dict[EventKind, str]
    """This stage's input topic for each event kind that outside sources publish."""
    fixed: dict[str, str] = field(default_factory=dict)
    """Upstream stage partitions (source name -> the topic they report on): always waited for."""
    max_source_lag_s: float = 600.0
    _upto: dict[tuple[str, str], datetime] = field(default_factory=dict)
    _offset: dict[tuple[str, str], int] = field(default_factory=dict)
    """Where the report that set each channel's progress was read (its topic's partition)."""
    _saved: dict[tuple[str, str], tuple[datetime, int]] = field(default_factory=dict)
    """Progress a previous owner saved, not yet trusted: see ``resolve``."""
    _needs: dict[str, frozenset[str]] = field(default_factory=dict)

    def on_progress(self, topic: str, progress: SourceProgress, offset: int = -1) -> bool:
        """Record a report read at ``offset``; True when it moved this channel forward."""
        if progress.source not in self.fixed:
            needs = frozenset(
                self.topic_of_kind[k] for k in progress.kinds if k in self.topic_of_kind
            )
            self._needs[progress.source] = needs
        ch = (progress.source, topic)
        old = self._upto.get(ch)
        if old is not None and progress.upto <= old:
            return False
        self._upto[ch] = progress.upto
        self._offset[ch] = offset
        return True

    def resolve(self, topic: str, start: int | None) -> list[tuple[str, str, str, int]]:
        """Trust or drop the saved progress of ``topic``'s channels, once this owner knows
        where it reads that topic from (``start``: where the commit ledger says the consumer
        resumes it; None: not known yet). A saved report below the start was committed past
        and is not read again: its progress holds. One at or past it is read again, and the
        items before it with it: trusted now, it would release past those items before they
        come back (two topics of one partition read in any interleaving; the chaos soak lost
        169 events that way, dead-lettered as late after a rebalance)."""
        if start is None or not self._saved:
            return []
        trusted: list[tuple[str, str, str, int]] = []
        for ch in [c for c in self._saved if c[1] == topic]:
            at, offset = self._saved.pop(ch)
            old = self._upto.get(ch)
            if offset < start and (old is None or at > old):
                self._upto[ch] = at
                self._offset[ch] = offset
                trusted.append((*ch, at.isoformat(), offset))
        return trusted

    def current(self) -> datetime | None:
        """None until every source has reported on every topic it writes here."""
        fixed: list[datetime] = []
        for source, topic in self.fixed.items():
            at = self._upto.get((source, topic))
            if at is None:
                return None
            fixed.append(at)
        outside: list[datetime] = []
        for source, needs in self._needs.items():
            ats = [self._upto.get((source, t)) for t in needs]
            if not ats:
                continue
            if any(a is None for a in ats):
                return None
            outside.append(min(a for a in ats if a is not None))
        if outside:
            ahead = max(outside)
            lag = timedelta(seconds=self.max_source_lag_s)
            outside = [a for a in outside if ahead - a <= lag]
        marks = fixed + outside
        return min(marks) if marks else None

    def known(self) -> bytes:
        """The outside sources heard from and the topics each writes here (JSON): the part of
        ``save`` that says whom to wait for, and all that versions before it kept."""
        return orjson.dumps({s: sorted(t) for s, t in sorted(self._needs.items())})

    def expect(self, known: bytes) -> None:
        for source, needs in orjson.loads(known).items():
            self._needs.setdefault(source, frozenset(needs))

    def save(self) -> bytes:
        """Every channel's progress and the outside sources' topics (JSON), kept with the
        stage's release mark: a restarted stage resumes from it, so the reports it covers need
        not be read again and the worker may commit past them."""
        kept = {ch: (at, self._offset.get(ch, -1)) for ch, at in self._upto.items()}
        for ch, (at, offset) in self._saved.items():  # still undecided: passed on as they are
            if ch not in kept or at > kept[ch][0]:
                kept[ch] = (at, offset)
        return orjson.dumps(
            {
                "needs": orjson.Fragment(self.known()),
                "upto": [[s, t, at.isoformat(), o] for (s, t), (at, o) in sorted(kept.items())],
            }
        )

    def load(self, saved: bytes) -> None:
        """Each channel's saved progress waits for ``resolve``; one saved without the offset
        of its report (an older version) counts as below any start."""
        body = orjson.loads(saved)
        self.expect(orjson.dumps(body["needs"]))
        for source, topic, at, *offset in body["upto"]:
            self._saved[(source, topic)] = (datetime.fromisoformat(at), offset[0] if offset else -1)

    def undecided(self) -> bool:
        return bool(self._saved)

    def saved_topics(self) -> set[str]:
        """The topics whose saved progress ``resolve`` has not decided yet."""
        return {t for _, t in self._saved}

    def snapshot(self) -> dict[str, object]:
        """For logs and metrics: each channel's progress (and where its report was read)."""
        return {
            f"{s}@{t}": f"{at.isoformat()}#{self._offset.get((s, t), -1)}"
            for (s, t), at in sorted(self._upto.items())
        }


@dataclass(slots=True)
class Reorder(Generic[T]):
    """Items of one stage partition waiting for the watermark."""

    watermarks: Watermarks
    released: datetime | None = None
    """Everything at or before this was released (and so applied)."""
    restored: datetime | None = None
    """How far the partition's previous owner had released (from the table): copies at or before
    it are Kafka redelivering what that owner had not committed."""
    _heap: list[tuple[OrderKey, int, T]] = field(default_factory=list)
    _pushed: int = 0

    def __len__(self) -> int:
        return len(self._heap)

    def lateness(self, at: datetime) -> str | None:
        """None for an item to hold; "redelivered" for a copy of one already applied; "late"
        for one whose source broke its progress promise (sent it after reporting past it)."""
        if self.released is None or at > self.released:
            return None
        if self.restored is not None and at <= self.restored:
            return "redelivered"
        return "late"

    def add(self, key: OrderKey, item: T) -> None:
        self._pushed += 1
        heapq.heappush(self._heap, (key, self._pushed, item))

    def ready(self) -> tuple[datetime | None, list[tuple[OrderKey, T]]]:
        """The new watermark (None: unchanged) and the items it releases, in order."""
        wm = self.watermarks.current()
        if wm is None or (self.released is not None and wm <= self.released):
            return None, []
        out: list[tuple[OrderKey, T]] = []
        heap = self._heap
        while heap and heap[0][0].at <= wm:
            key, _, item = heapq.heappop(heap)
            out.append((key, item))
        self.released = wm
        return wm, out

    def drain(self) -> list[T]:
        """Everything still waiting (the partition moved to another worker)."""
        items = [item for _, _, item in self._heap]
        self._heap.clear()
        return items
