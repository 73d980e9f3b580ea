"""One keyed stage of the Faust runner: what every agent does the same way.

Decode or dead-letter; hold ordered input until every source of the partition has reported
progress past it (``ordering.Reorder``); release it in order, acknowledging each item only once
its state is written; record how far the partition released; drop redelivered copies; forget
everything held when partitions are revoked. What differs between stages (what a message is,
which operator it feeds, where the outputs go) is a ``StageLogic`` of about fifty lines.

Held input is never acknowledged. The worker commits a partition only up to the first message
a stage has not finished (``offsets.CommitLedger``, told here): an item once its release has
settled and the partition's mark is written, a progress report once the sources' progress is
written with a mark (``Watermarks.save``), a copy or a dead letter at once. So after a crash
or a rebalance Kafka hands what was not finished to the partition's next owner, which resumes
from the mark and the saved progress.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from models.progress import SourceProgress
from streams.distributed.codec import describe_error
from streams.distributed.offsets import CommitLedger
from streams.distributed.ordering import Reorder, Watermarks
from streams.instants import OrderKey

log = logging.getLogger(__name__)

Reject = Callable[[Any, str], Awaitable[None]]
"""Dead-letter one message (the Faust event) with a reason."""


@dataclass(frozen=True, slots=True)
class HeldInput:
    """An item to apply in event-time order."""

    order: OrderKey
    item: object
    derived: bool = False
    """Made by an upstream stage: a copy behind the mark is that stage re-sending after its
    restart (a redelivery), never a broken promise."""


Decoded = SourceProgress | HeldInput | None
"""None: nothing to do with this message (acknowledged)."""


class StageLogic(Protocol):
    name: str

    def decode(self, topic: str, raw: bytes) -> Decoded:
        """Raises on a message that is not one of ours; it is dead-lettered."""
        ...

    async def apply(self, order: OrderKey, item: object) -> None:
        """Feed the operator, write its state, send its outputs."""
        ...

    async def settle(self, p: int, upto: datetime) -> None:
        """Partition ``p`` released everything up to ``upto``; called before that is marked."""
        ...

    async def report(self, p: int, upto: datetime) -> None:
        """After the mark: tell the stages downstream how far this partition is complete."""
        ...

    def reset(self) -> None:
        """Partitions were revoked or read again from their start: forget in-memory operator
        state (the tables keep it). A call still sending outputs for the old state must not
        write that state afterwards."""
        ...


@dataclass(slots=True)
class StageCounters:
    counts: dict[str, int]

    def add(self, name: str, n: int = 1) -> None:
        self.counts[name] = self.counts.get(name, 0) + n


Position = tuple[str, int, int]
"""Where a message was read: topic, partition, offset."""


def position(message: Any) -> Position:
    return (message.topic, message.partition, message.offset)


def released_key(p: int) -> bytes:
    # "~" appears in no pod key, node name or operator state entry
    return f"~released/{p}".encode()


def sources_key(p: int) -> bytes:
    """The outside sources heard from, as versions before ``progress_key`` kept them."""
    return f"~sources/{p}".encode()


def progress_key(p: int) -> bytes:
    return f"~progress/{p}".encode()


class KeyedStage:
    def __init__(
        self,
        logic: StageLogic,
        *,
        table: Any,
        marks: Callable[[], Watermarks],
        reject: Reject,
        counters: StageCounters,
        ledger: CommitLedger,
    ) -> None:
        self.logic = logic
        self.ledger = ledger
        self.table = table
        self._marks = marks
        self._reject = reject
        self.counters = counters
        self.buffers: dict[int, Reorder[Any]] = {}
        self._holding: dict[int, set[Position]] = {}
        """Where each held item was read, to recognise a second delivery of it."""
        self._held_keys: dict[int, set[OrderKey]] = {}
        """The order keys of the outside sources' items held, to recognise a copy sent again
        (a second record, at another offset, with the same envelope: the publisher's resend)."""
        self._rereported: set[int] = set()
        self._read_upto: dict[int, dict[str, int]] = {}
        """The highest offset of each topic of a partition read since it was assigned."""
        self._first_read: dict[int, dict[str, int]] = {}
        """The first offset each topic of a partition was read from since it was assigned."""
        self._late_logged: set[int] = set()
        """Partitions whose first late message since assignment was logged with its marks."""
        self._unmarked: dict[int, list[Position]] = {}
        """Progress reports read since the partition's last mark: finished at the next one."""

    @property
    def waiting(self) -> int:
        return sum(len(b) for b in self.buffers.values())

    async def run(self, stream: Any) -> AsyncIterator[None]:
        """The agent's body."""
        s = stream.noack()
        async for event in s.events():
            await self.on_event(s, event)
            yield None

    async def on_event(self, s: Any, event: Any) -> None:
        msg = event.message
        self.counters.add("read")
        first = self._first_read.setdefault(msg.partition, {}).setdefault(msg.topic, msg.offset)
        read_upto = self._read_upto.setdefault(msg.partition, {})
        # read before by this owner: between the first offset it read and the highest. One
        # below the first was never read here, whatever the highest (the consumer must not
        # hand on a record before its seek, ``positions.py``; if it did, the item is refused
        # as late, loudly, never dropped as a copy)
        upto = read_upto.get(msg.topic, -1)
        again = first <= msg.offset <= upto
        read_upto[msg.topic] = max(upto, msg.offset)
        self._trust_saved(msg.partition)
        try:
            decoded = self.logic.decode(msg.topic, event.value)
        except Exception as exc:  # not one of ours: dead letter, go on
            await self._reject(event, describe_error(exc))
            await self._ack(s, event)
            return
        if decoded is None:
            await self._ack(s, event)
        elif isinstance(decoded, SourceProgress):
            await self._progress(s, msg.partition, event, decoded)
        else:
            buf = self.buffer(msg.partition)
            why = buf.lateness(decoded.order.at)
            if why is None:
                holding = self._holding.setdefault(msg.partition, set())
                at = position(msg)
                if at in holding:
                    # read twice in one assignment (the consumer goes back to the commit or the
                    # start after a rebalance, see transport.py): the copy already held is the
                    # one acknowledged on release
                    self.counters.add("read_twice")
                    return
                if not decoded.derived:
                    keys = self._held_keys.setdefault(msg.partition, set())
                    if decoded.order in keys:
                        await self._copy(s, event)
                        return
                    keys.add(decoded.order)
                holding.add(at)
                buf.add(decoded.order, (event, decoded.item))
            else:
                # read before by this owner of the partition (the consumer went back to its
                # commit: Faust seeks more than once per rebalance): a copy of an item already
                # applied or refused, never a broken promise
                copy = decoded.derived or again
                await self._drop_late(s, event, "redelivered" if copy else why, buf)

    async def _copy(self, s: Any, event: Any) -> None:
        """The same envelope (time, sequence number, source, id) as an item held, in a record
        of its own: a publisher whose producer took nothing sends again, with a new producer,
        what the old one had not confirmed, and some of it had been written. It checks every
        delivery before its next progress report, so the first copy is still held when the
        second is read. Applied twice, a pod's or node's state changes nothing, but a
        ResourceQuota refusal would be counted twice: the copy is dropped here, finished."""
        self.counters.add("copies")
        await self._ack(s, event)

    async def _ack(self, s: Any, event: Any) -> None:
        """Acknowledge a message whose handling is complete: one that is not ours, a copy, or a
        dead letter."""
        await s.ack(event)
        self._finished(event.message)

    def _trust_saved(self, p: int) -> None:
        """Progress a previous owner saved for a topic is trusted only for reports below where
        this owner reads the topic from, which the ledger learns after the consumer's seek to
        the group's commit. Not the first offset read: a record fetched before the last seek
        of a rebalance can come first (offset 113 where the seek then went back to 33, in the
        chaos soak), and progress trusted on its word released past the items read after it. (The
        consumer now drops such records, ``positions.py``; this rule does not rely on it.)"""
        marks = self.buffer(p).watermarks
        if not marks.undecided():
            return
        for topic in marks.saved_topics():
            start = self.ledger.resumes_at(topic, p)
            if trusted := marks.resolve(topic, start):
                log.debug("%s/%s: saved progress trusted below %s: %s", topic, p, start, trusted)

    def _finished(self, msg: Any) -> None:
        self.ledger.done(self.logic.name, msg.topic, msg.partition, msg.offset)

    def _marked(self, p: int, released: list[Position]) -> None:
        """The partition's mark and its sources' progress were written: what it released is in
        the stage's state (the cluster view applies its input only when it settles), and so
        are the reports read since the last mark."""
        for topic, partition, offset in released + self._unmarked.pop(p, []):
            self.ledger.done(self.logic.name, topic, partition, offset)

    def buffer(self, p: int) -> Reorder[Any]:
        buf = self.buffers.get(p)
        if buf is None:
            buf = Reorder(self._marks())
            raw = self.table.get(released_key(p))
            if raw is not None:
                buf.released = buf.restored = datetime.fromisoformat(raw.decode())
            saved = self.table.get(progress_key(p))
            known = self.table.get(sources_key(p))
            if saved is not None:
                buf.watermarks.load(saved)
            elif known is not None:  # kept by an older version: wait for each source again
                buf.watermarks.expect(known)
            self.buffers[p] = buf
        return buf

    def revoked(self, partitions: set[int]) -> None:
        """Held input was not acknowledged: the partitions' next owners read it again."""
        for p in partitions:
            self.buffers.pop(p, None)
            self._holding.pop(p, None)
            self._held_keys.pop(p, None)
            self._unmarked.pop(p, None)
            self._first_read.pop(p, None)
            self._read_upto.pop(p, None)
            self._late_logged.discard(p)
            self._rereported.discard(p)
        self.logic.reset()

    async def _progress(self, s: Any, p: int, event: Any, progress: SourceProgress) -> None:
        buf = self.buffer(p)
        marks = buf.watermarks
        marks.on_progress(event.message.topic, progress, event.message.offset)
        await s.ack(event)
        self._unmarked.setdefault(p, []).append(position(event.message))
        before = buf.released
        wm, ready = buf.ready()
        if wm is None:
            await self._report_restored(p, buf)
            return
        if before == buf.restored:  # the first release since the partition was assigned
            log.info(
                "%s/%s first release: %s -> %s on %s (first read %s)",
                self.logic.name,
                p,
                before,
                wm,
                marks.snapshot(),
                self._first_read.get(p),
            )
        holding = self._holding.get(p, set())
        held_keys = self._held_keys.get(p, set())
        released: list[Position] = []
        for order, (ev, item) in ready:
            held_keys.discard(order)
            if self.buffers.get(p) is not buf:
                return  # revoked meanwhile: its next owner redoes the rest, so no mark
            await self.logic.apply(order, item)
            if self.buffers.get(p) is not buf:
                return  # forgotten while applying: its state was not written either
            at = position(ev.message)
            holding.discard(at)
            await s.ack(ev)
            released.append(at)
        self.counters.add("released", len(ready))
        await self.logic.settle(p, wm)
        if self.buffers.get(p) is not buf:
            return  # forgotten while settling: all of it is read and released again
        self.table[released_key(p)] = wm.isoformat().encode()
        self.table[progress_key(p)] = buf.watermarks.save()
        self._marked(p, released)
        await self.logic.report(p, wm)

    async def _report_restored(self, p: int, buf: Reorder[Any]) -> None:
        """A restarted partition tells the stages downstream its restored mark again, once its
        sources are back there: the previous owner may have stopped between writing the mark
        and reporting it, and nothing after the end of a stream would report it otherwise.
        A repeated report is harmless."""
        mark = buf.restored
        if mark is None or p in self._rereported:
            return
        current = buf.watermarks.current()
        if current is not None and current >= mark:
            self._rereported.add(p)
            await self.logic.report(p, mark)

    async def _drop_late(self, s: Any, event: Any, why: str, buf: Reorder[Any]) -> None:
        if why == "redelivered":
            self.counters.add("redelivered")
        else:  # never silently: the source promised this would not come
            assert buf.released is not None
            msg = event.message
            first = msg.partition not in self._late_logged
            self._late_logged.add(msg.partition)
            (log.warning if first else log.debug)(
                "%s/%s@%s late for stage %s: restored %s, released %s, first read %s, "
                "resumes at %s, progress %s",
                msg.topic,
                msg.partition,
                msg.offset,
                self.logic.name,
                buf.restored,
                buf.released,
                self._first_read.get(msg.partition),
                self.ledger.resumes_at(msg.topic, msg.partition),
                buf.watermarks.snapshot(),
            )
            await self._reject(
                event,
                f"late: event time at or before {buf.released.isoformat()}, which its source "
                "had already reported complete",
            )
        await self._ack(s, event)
