"""Which fetched records the worker's consumer hands on: only the next one of each stream
partition since its last seek.

Offsets are contiguous on the input topics (no compaction, no transactions), so after a seek to
``n`` the stages must see ``n``, ``n + 1``, ... and nothing else. Faust breaks that three ways:

- its fetcher iterates a batch it fetched before a seek after the seek has moved the partition
  back, so records from the old position reach the agents first. In the chaos soak a partition
  read again from its start (``transport.py``) got offsets 9 onward before 0 to 8; its stage
  had just forgotten the partition, took the progress reports among them, released past the
  events at 0 to 8 and then refused those as late;
- it tags a batch with the generation current when it iterates it, not when it fetched it, so
  a batch fetched under the old assignment came through after a rebalance;
- its recovery resumes the stream partitions before it seeks them to their commits, and the
  consumer hands on what it fetches meanwhile. A worker added to the group read the tasks
  partitions from 112 and 118 while their commits were 65 and 70 (the chaos soak under load):
  its stage released past the events in between on the progress report at 112, then took them,
  read after the seek, for copies of what it had read. 42 pods were lost without a word.

So a stream partition hands on nothing until the consumer has sought it in the current
assignment. What the fetcher took between that seek and its mark here is dropped, and the
fetcher's position is past it: ``seeked`` says so, and the consumer seeks the partition to the
mark once more. Without that a restarted worker's cluster stage lost the 5 records of its queues
partition, fetched while the recovery was still looking up the partition's start; nothing came
after them to show the gap, and the stage waited for them until the test gave up (10 minutes;
a CI run, and the 4th of 4 runs here with one core kept busy).

After that, a record behind the next offset is a copy of one already handed on (or below the
commit), and one ahead of it is from before the seek: both are dropped, and the first one
ahead also seeks the partition back to the next offset, so a position moved by anything else
(a reset past the log's start) is read from where the stages are. A table's changelog, which
Faust's recovery positions itself, hands on everything.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Generic, TypeVar

K = TypeVar("K")


class Admit(Enum):
    DELIVER = "deliver"
    BEHIND = "behind"
    """A copy of a record handed on since the seek, or one below it: dropped."""
    AHEAD = "ahead"
    """From before the last seek: dropped (the seek back is already asked for)."""
    UNSOUGHT = "unsought"
    """A stream partition not sought in the current assignment: fetched before a revocation,
    or read before the assignment's seek, which reads it again: dropped."""
    SEEK_BACK = "seek_back"
    """The first record ahead since the partition was last in order: dropped, and the consumer
    seeks the partition to ``next_offset``."""


@dataclass(slots=True)
class ReadPositions(Generic[K]):
    _next: dict[K, int] = field(default_factory=dict)
    _behind_seek: set[K] = field(default_factory=set)
    _unsought_upto: dict[K, int] = field(default_factory=dict)
    """The highest offset of each partition dropped as unsought since its last seek."""
    dropped: dict[Admit, int] = field(default_factory=dict)

    def seeked(self, tp: K, offset: int) -> bool:
        """The consumer reads ``tp`` from ``offset`` on. True when records at or after it were
        dropped as unsought meanwhile: the fetcher is past them, so the consumer must seek
        ``tp`` to ``offset`` again."""
        self._next[tp] = offset
        self._behind_seek.discard(tp)
        return self._unsought_upto.pop(tp, -1) >= offset

    def forget(self, tp: K) -> None:
        """``tp`` was revoked: a stream partition hands on nothing of it until it is sought
        again (every assignment seeks those)."""
        self._next.pop(tp, None)
        self._behind_seek.discard(tp)

    def next_offset(self, tp: K) -> int | None:
        return self._next.get(tp)

    def admit(self, tp: K, offset: int, *, stream: bool) -> Admit:
        """``stream``: ``tp`` is read from where the consumer seeks it; otherwise it is a table's
        changelog, which hands on everything."""
        expected = self._next.get(tp)
        if expected is None:
            if not stream:
                return Admit.DELIVER
            verdict = Admit.UNSOUGHT
            self._unsought_upto[tp] = max(offset, self._unsought_upto.get(tp, -1))
        elif offset == expected:
            self._next[tp] = offset + 1
            self._behind_seek.discard(tp)
            return Admit.DELIVER
        elif offset < expected:
            verdict = Admit.BEHIND
        elif tp in self._behind_seek:
            verdict = Admit.AHEAD
        else:
            self._behind_seek.add(tp)
            verdict = Admit.SEEK_BACK
        self.dropped[verdict] = self.dropped.get(verdict, 0) + 1
        return verdict
