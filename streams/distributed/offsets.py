"""How far each input partition may be committed: the worker's own bookkeeping, not Faust's.

Faust's commit counts a message done once its stream acknowledges it, and its stream
acknowledges the messages it skips during a rebalance (fetched while the flow was stopped or
under the previous generation), which no stage ever saw; its arithmetic also misses a hole at
the head of the acknowledged run. A commit made that way can pass input a stage still holds,
and that input is lost at the next crash. So the stages tell this ledger, message by message,
when a message's effects are written (its state in the stage's table, its outputs handed to
the producer, or it was dropped as a copy or dead-lettered), and a partition is committed up to
the first offset that is not done by every stage that reads its topic (the scheduler events
feed two). Offsets are contiguous on the input topics (no compaction, no transactions), so a
message never delivered to a stage keeps the commit behind it, never past it.

Held input is not done, and neither is a progress report until the sources' progress is saved
with the next release mark (``stage.py``), so a partition's commit stays at or below both. The
consumer flushes the producer before it commits (Faust does), so what a committed offset
covers is on the output and changelog topics.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

__all__ = ["CommitLedger"]

TopicPartition = tuple[str, int]


@dataclass(slots=True)
class _Partition:
    base: int | None = None
    """The first offset not yet done by every reader; None until the consumer says where it
    starts reading (after its seek)."""
    done: dict[int, set[str]] = field(default_factory=dict)
    """Offsets at or past ``base`` and the stages that have finished them."""
    committed: int | None = None
    """Where the group would resume the partition: the last commit, or where this consumer
    started reading it (a commit made earlier, or the log's start)."""


class CommitLedger:
    def __init__(self, readers: Mapping[str, Iterable[str]]) -> None:
        """``readers``: topic -> the stages that read it. A topic not named has no reader
        here, and nothing of it is ever committed."""
        self._readers = {topic: frozenset(names) for topic, names in readers.items()}
        self._parts: dict[TopicPartition, _Partition] = {}
        self._revoked: set[TopicPartition] = set()
        """Forgotten and not started again: a word about them comes from the stages' work
        for the revoked assignment and is not counted."""

    def done(self, stage: str, topic: str, partition: int, offset: int) -> None:
        """``stage`` has finished the message: its effects are written (or it was dropped).
        Said only after the fact, so an offset once done stays done: a late word about a copy
        read before a seek is still true of that offset."""
        readers = self._readers.get(topic)
        if readers is None or stage not in readers or (topic, partition) in self._revoked:
            return
        part = self._parts.setdefault((topic, partition), _Partition())
        if part.base is not None and offset < part.base:
            return
        part.done.setdefault(offset, set()).add(stage)
        self._advance(topic, part)

    def start(self, topic: str, partition: int, offset: int) -> None:
        """The consumer reads the partition from ``offset`` on (after a seek): everything below
        it is covered by a commit or gone from the log. A topic no stage reads (Faust's own
        ``__assignor-__leader``) is left to Faust."""
        if topic not in self._readers:
            return
        self._revoked.discard((topic, partition))
        part = self._parts.setdefault((topic, partition), _Partition())
        part.base = part.committed = offset
        part.done = {o: s for o, s in part.done.items() if o >= offset}
        self._advance(topic, part)

    def forget(self, topic: str, partition: int) -> None:
        """The partition was revoked: its next owner commits it. Until this consumer starts
        it again, what the stages say of it is not counted. Before, such words survived into
        the next assignment of the same partition to this worker (``start`` keeps what was
        finished before it): the one way found for what the chaos soak showed once, a tasks
        partition read from 105 after a rebalance while its commit had been 67, and the pod
        events between never read again."""
        self._parts.pop((topic, partition), None)
        if topic in self._readers:
            self._revoked.add((topic, partition))

    def committable(self) -> Iterator[tuple[TopicPartition, int]]:
        """Partitions whose safe offset is past their last commit, with that offset."""
        for tp, part in self._parts.items():
            if part.base is not None and (part.committed is None or part.base > part.committed):
                yield tp, part.base

    def safe(self, topic: str, partition: int) -> int | None:
        part = self._parts.get((topic, partition))
        return None if part is None else part.base

    def committed(self, topic: str, partition: int, offset: int) -> None:
        part = self._parts.get((topic, partition))
        if part is not None and (part.committed is None or offset > part.committed):
            part.committed = offset

    def resumes_at(self, topic: str, partition: int) -> int | None:
        """Where this consumer reads the partition from (its commit, or the log's start), or a
        later commit of its own; None before it said (``start``)."""
        part = self._parts.get((topic, partition))
        return None if part is None else part.committed

    def commits(self) -> dict[TopicPartition, int]:
        """Where the group would resume each partition held here (for the lag gauge)."""
        return {tp: p.committed for tp, p in self._parts.items() if p.committed is not None}

    def _advance(self, topic: str, part: _Partition) -> None:
        need = self._readers.get(topic)
        if part.base is None or need is None:
            return
        while (stages := part.done.get(part.base)) is not None and stages >= need:
            del part.done[part.base]
            part.base += 1
