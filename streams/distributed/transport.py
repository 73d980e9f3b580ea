"""Faust's Kafka transport, adjusted for how gpufrag's stages acknowledge.

- Every producer is idempotent with acks=all. Faust turns idempotence on only inside
  transactions; at-least-once processing still wants it, so a retried produce never duplicates
  or reorders a partition.
- The worker's consumer commits each input partition up to the first message a stage has not
  finished (``offsets.CommitLedger``, told by the stages), never by Faust's own acknowledgement
  bookkeeping: Faust's stream acknowledges the messages it skips during a rebalance (fetched
  while the flow was stopped or under the previous generation), which no stage saw, and its
  commit arithmetic misses a hole at the head of the acknowledged run. Either would commit past
  held input, lost at the next crash.
- After a rebalance aiokafka's "seek to committed" leaves a partition without a commit wherever
  the consumer had got to. With 2 workers and one leaving mid-stream, 4 runs in 20 under load on
  2 cores lost every input message read between the last release and the rebalance, on every
  partition (141 pod events, and the signals after them): the survivor went on past what its
  stages had been holding when the rebalance made them forget it. So at the end of each
  rebalance's recovery (Faust's seek) every stream partition without a commit goes back to its
  start, the agents' queues are emptied and the stages forget what they held or were releasing
  for it, as on a revocation (``REWOUND_HOOK``). A partition with a commit is read from it.
- The consumer hands the agents each stream partition's records in offset order from where
  it last sought it in the current assignment, and nothing before that seek
  (``positions.py``): Faust's fetcher still iterates a batch fetched before a seek, and its
  recovery resumes the partitions before it seeks them; both put records the stages must not
  see first in front of them (lost events, in the chaos soak).
- Faust's consumer drops a message below the last offset it delivered for the partition (its
  "read offset"), so after a seek back it would drop what the stages had forgotten: the read
  offsets are kept for table changelogs only (Faust's recovery seeks those). The stages
  recognise a copy themselves (``stage.py``): behind their release mark it is redelivered, and
  read while its first copy is still held it is dropped.

Registered as the ``gpufrag://`` broker scheme through Faust's own transport entry point (see
pyproject.toml).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from typing import Any, ClassVar

from aiokafka import TopicPartition
from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types import TP

from streams.distributed.offsets import CommitLedger
from streams.distributed.positions import Admit, ReadPositions

log = logging.getLogger(__name__)

Rewound = Callable[[set[TP]], None]
"""Told which stream partitions went back to their start, before anything is read again."""

REWOUND_HOOK = "gpufrag_rewound"
"""The attribute of the Faust app holding its ``Rewound`` callback (set by the worker's app,
``streams.distributed.app``, whose stages forget those partitions)."""

LEDGER = "gpufrag_ledger"
"""The attribute of the Faust app holding its ``CommitLedger`` (set by the worker's app; a
consumer without one commits nothing)."""


class IdempotentProducer(faust_aiokafka.Producer):
    def _settings_extra(self) -> Mapping[str, Any]:
        return {"acks": "all", "enable_idempotence": True}


def rewind_targets(
    assigned: Iterable[TP], *, committed: Mapping[TP, int | None], changelog: Callable[[TP], bool]
) -> set[TP]:
    """The stream partitions to read again from their start: those with no commit above 0
    (aiokafka leaves them where they were). Table changelogs are Faust's recovery's own."""
    return {tp for tp in assigned if not changelog(tp) and not committed.get(tp)}


class ChangelogReadOffsets(defaultdict[TP, int | None]):
    """Faust's read offsets (below which its consumer drops a message), consulted for table
    changelogs only: for stream partitions the stages recognise what they read twice."""

    def __init__(self, changelog: Callable[[TP], bool]) -> None:
        super().__init__(lambda: None)
        self._changelog = changelog

    def __getitem__(self, tp: TP) -> int | None:
        return super().__getitem__(tp) if self._changelog(tp) else None


class HoldingConsumer(faust_aiokafka.Consumer):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._read_offset = ChangelogReadOffsets(self._is_changelog_tp)
        self._positions: ReadPositions[TP] = ReadPositions()

    @property
    def ledger(self) -> CommitLedger | None:
        ledger: CommitLedger | None = getattr(self.app, LEDGER, None)
        return ledger

    def _filter_tps_with_pending_acks(self, topics: Any = None) -> Iterator[TP]:
        # Faust's acknowledgement lists decide nothing here (see the module's docstring);
        # emptied at each commit so they do not grow for the life of the worker
        self._acked.clear()
        self._acked_index.clear()
        if self.ledger is None:
            return iter(())
        tps = [TP(t, p) for (t, p), _ in self.ledger.committable()]
        return (tp for tp in tps if topics is None or tp in topics or tp.topic in topics)

    def _new_offset(self, tp: TP) -> int | None:
        return None if self.ledger is None else self.ledger.safe(tp.topic, tp.partition)

    async def _commit(self, offsets: Mapping[TP, int]) -> bool:
        ok: bool = await super()._commit(offsets)
        if ok and self.ledger is not None:
            for tp, offset in offsets.items():
                self.ledger.committed(tp.topic, tp.partition, offset)
        return ok

    async def on_partitions_revoked(self, revoked: set[TP]) -> None:
        # no commit here: the rebalance listener runs on the consumer's thread, which the
        # commit would wait for; what was finished since the last commit is read again
        for tp in revoked:
            self._positions.forget(tp)
            if self.ledger is not None:
                self.ledger.forget(tp.topic, tp.partition)
        await super().on_partitions_revoked(revoked)

    async def getmany(self, timeout: float) -> AsyncIterator[tuple[TP, Any]]:
        async for tp, message in super().getmany(timeout):
            verdict = self._positions.admit(
                tp, message.offset, stream=not self._is_changelog_tp(tp)
            )
            if verdict is Admit.DELIVER:
                yield tp, message
            elif verdict is Admit.SEEK_BACK:
                await self._seek_back(tp, message.offset)

    async def _seek_back(self, tp: TP, offset: int) -> None:
        """A record ahead of the next offset: from a batch fetched before the last seek, or the
        position moved by a reset. Read again from the next offset, or from the log's start
        if retention took it (the ledger then waits for nothing below)."""
        target = self._positions.next_offset(tp)
        if target is None or tp not in self.assignment():  # revoked meanwhile
            return
        earliest = (await self._thread.earliest_offsets(tp)).get(tp) or 0
        log.info("%s read at %s ahead of %s: read again from there", tp, offset, target)
        if earliest > target:
            target = earliest
            self._positions.seeked(tp, target)
            if self.ledger is not None:
                self.ledger.start(tp.topic, tp.partition, target)
        # on the consumer's own thread, waiting for the new position (a plain ``seek`` calls
        # into aiokafka from this thread)
        await self._thread.seek_wait({tp: target})

    async def perform_seek(self) -> None:
        await super().perform_seek()
        streams = {tp for tp in self.assignment() if not self._is_changelog_tp(tp)}
        rewound = rewind_targets(
            streams, committed=self._committed_offset, changelog=self._is_changelog_tp
        )
        if rewound:
            await self._thread.seek_to_beginning(*(TopicPartition(t, p) for t, p in rewound))
            # nothing read before the seek is used: copies still queued for the agents go, and
            # the stages forget what they held (all of it is read again)
            self.app.flow_control.clear()
            hook: Rewound | None = getattr(self.app, REWOUND_HOOK, None)
            if hook is not None:
                hook(rewound)
        if not streams:
            return
        # a commit below the log's start (retention) reads from the start: nothing below it
        # exists to wait for
        earliest = await self._thread.earliest_offsets(*streams)
        starts: dict[TP, int] = {}
        again: dict[TP, int] = {}
        for tp in streams:
            start = max(earliest.get(tp) or 0, self._committed_offset.get(tp) or 0)
            if self.ledger is not None:
                self.ledger.start(tp.topic, tp.partition, start)
            if self._positions.seeked(tp, start):
                again[tp] = start
            starts[tp] = start
        self._log_starts(starts, again)
        if again:
            # the fetcher ran on while the starts were looked up: what it took from them was
            # dropped (not sought yet), so those partitions are read from their start again
            await self._thread.seek_wait(again)

    def _log_starts(self, starts: Mapping[TP, int], again: Mapping[TP, int]) -> None:
        """Where each stream partition is read from, and how many records fetched before the
        seek were dropped: what a lost or repeated stretch of input is traced back to."""
        unsought = self._positions.dropped.get(Admit.UNSOUGHT, 0)
        log.info(
            "stream partitions read from %s; %d records fetched before a seek dropped so far%s",
            _listed(starts),
            unsought,
            f"; sought again (fetched from before the mark): {_listed(again)}" if again else "",
        )


def _listed(offsets: Mapping[TP, int]) -> str:
    return " ".join(
        f"{tp.topic.rsplit('.', 1)[-1]}/{tp.partition}@{o}" for tp, o in sorted(offsets.items())
    )


class Transport(faust_aiokafka.Transport):
    Producer: ClassVar[type] = IdempotentProducer
    Consumer: ClassVar[type] = HoldingConsumer
