"""Faust's Kafka transport, adjusted for how gpufrag's stages acknowledge.

- Every producer is idempotent with acks=all. Faust turns idempotence on only inside
  transactions; at-least-once processing still wants it, so a retried produce never duplicates
  or reorders a partition.
- The worker's consumer commits no offsets, and after every rebalance it reads each input
  partition again from its start. The stages hold input (not acknowledged) until every source
  has reported progress past it, and rely on reading held input again after a rebalance; each
  stage's table says how far it had released, so what it reads again up to there is dropped as
  redelivered, and an item read again while its first copy is still held is dropped too
  (``stage.py``). Faust cannot be trusted with any of it:
  - its commit arithmetic checks for a hole at the head of the acknowledged run off by one, and
    not at all before a partition's first commit, and its stream acknowledges the messages it
    skips during a rebalance (those fetched while the flow was stopped or under the previous
    generation): a commit could pass held input, lost at the next crash;
  - after a rebalance aiokafka's "seek to committed" leaves a partition without a commit
    wherever the consumer had got to. With 2 workers and one leaving mid-stream, 4 runs in 20
    under load on 2 cores lost every input message read between the last release and the
    rebalance, on every partition (141 pod events, and the signals after them): the survivor
    went on past what its stages had been holding when the rebalance made them forget it;
  - its consumer drops a message below the last offset it delivered for the partition (its
    "read offset"), so after a seek back it would drop what the stages had forgotten.
  So at the end of each rebalance's recovery (Faust's seek) every stream partition without a
  commit goes back to its start, the agents' queues are emptied and the stages forget what
  they held or were releasing for it, as on a revocation (``REWOUND_HOOK``); and the read
  offsets are kept for table changelogs only (Faust's recovery seeks those), so nothing
  forgotten is dropped when it is read again. The cost: a rebalance re-reads the retained
  input (7 days) and drops it again.

Registered as the ``gpufrag://`` broker scheme through Faust's own transport entry point (see
pyproject.toml).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar

from aiokafka import TopicPartition
from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types import TP

Rewound = Callable[[set[TP]], None]
"""Told which stream partitions went back to their start, before anything is read again."""

REWOUND_HOOK = "gpufrag_rewound"
"""The attribute of the Faust app holding its ``Rewound`` callback (set by the worker's app,
``streams.distributed.app``, whose stages forget those partitions)."""


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

    def _new_offset(self, tp: TP) -> int | None:
        return None  # never commit (see the module's docstring)

    async def perform_seek(self) -> None:
        await super().perform_seek()
        rewound = rewind_targets(
            self.assignment(), committed=self._committed_offset, changelog=self._is_changelog_tp
        )
        if not rewound:
            return
        await self._thread.seek_to_beginning(*(TopicPartition(t, p) for t, p in rewound))
        # nothing read before the seek is used: copies still queued for the agents go, and
        # the stages forget what they held (all of it is read again)
        self.app.flow_control.clear()
        hook: Rewound | None = getattr(self.app, REWOUND_HOOK, None)
        if hook is not None:
            hook(rewound)


class Transport(faust_aiokafka.Transport):
    Producer: ClassVar[type] = IdempotentProducer
    Consumer: ClassVar[type] = HoldingConsumer
