"""Faust's Kafka transport, adjusted for how gpufrag's stages acknowledge.

- Every producer is idempotent with acks=all. Faust turns idempotence on only inside
  transactions; at-least-once processing still wants it, so a retried produce never duplicates
  or reorders a partition.
- The consumer never commits past a message a stage still holds. The stages hold input (not
  acknowledged) until every source has reported progress past it, and rely on Kafka handing held
  input to the partition's next owner. Faust commits the longest run of acknowledged offsets but
  checks for a hole at its head off by one, and not at all before a partition's first commit, so
  a held message just behind acknowledged ones could be committed past and lost in a crash.

Registered as the ``gpufrag://`` broker scheme through Faust's own transport entry point (see
pyproject.toml).
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from typing import Any, ClassVar

from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types import TP, Message
from faust.utils.functional import consecutive_numbers


class IdempotentProducer(faust_aiokafka.Producer):
    def _settings_extra(self) -> Mapping[str, Any]:
        return {"acks": "all", "enable_idempotence": True}


def next_commit(acked: list[int], *, base: int | None) -> int | None:
    """The offset to commit: the end of the run of acknowledged offsets that starts exactly at
    ``base`` (the next offset to read as of the last commit), or None when ``base`` itself is
    not acknowledged yet. Removes the committed run from ``acked`` (kept sorted)."""
    acked.sort()
    if not acked or base is None or acked[0] != base:
        return None
    run = next(consecutive_numbers(acked))
    del acked[: len(run)]
    return int(run[-1]) + 1


class HoldingConsumer(faust_aiokafka.Consumer):
    _first_offset: dict[TP, int]

    def track_message(self, message: Message) -> None:
        super().track_message(message)
        firsts = self.__dict__.setdefault("_first_offset", {})
        firsts.setdefault(message.tp, message.offset)

    async def on_partitions_revoked(self, revoked: Set[TP]) -> None:
        firsts = self.__dict__.setdefault("_first_offset", {})
        for tp in revoked:
            firsts.pop(tp, None)
        await super().on_partitions_revoked(revoked)

    def _new_offset(self, tp: TP) -> int | None:
        acked = self._acked[tp]
        if not acked:
            return None
        gaps = self._gap[tp]
        if gaps:  # offsets that will never come (compaction) count as acknowledged, as in Faust
            top = max(acked)
            spans = sorted(gaps.overlap(0, top), key=lambda span: span.begin)
            if spans:
                filled = [o for span in spans for o in range(span.begin, span.end)]
                acked.extend(filled)
                gaps.chop(0, max(filled[-1], top + 1))
        base = self._committed_offset[tp]
        if base is None:
            base = self.__dict__.get("_first_offset", {}).get(tp)
        before = set(acked)
        new = next_commit(acked, base=base)
        if new is not None:
            self._acked_index[tp].difference_update(before - set(acked))
        return new


class Transport(faust_aiokafka.Transport):
    Producer: ClassVar[type] = IdempotentProducer
    Consumer: ClassVar[type] = HoldingConsumer
