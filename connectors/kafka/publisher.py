"""Publishing events onto the bus: one topic per kind, keyed by the envelope's key.

acks=all with idempotence, so a retried send cannot duplicate or reorder a partition; the
envelope's id makes every downstream write idempotent as well. Events get their position in
this publisher's order (``seq``), and the publisher reports its progress in event time to every
partition it writes (``models.progress``), so the workers can restore event-time order.

Every send's delivery is checked before the next progress report and at the end. The producer
retries what the broker may still take, but a broker restarted under load refused the rest of
three partitions' batches for good (the chaos soak: those partitions stopped at 4 records while
the publisher went on and exited 0, and the workers waited for events that never came). Records
the broker refused are sent again, in their order, by a new producer (a new producer id: the
refusal was for the old one's sequence), up to ``RESEND_ROUNDS`` times; after that the
publisher fails with the broker's error, never silently.

A producer that takes nothing for its request timeout (aiokafka's ``send`` then raises
``KafkaTimeoutError``, its buffer full) is replaced by a new one, which first sends again, in
order, what the old one had not confirmed; so is one whose flush outlasts that timeout: a
bound on a producer that really stops (what looked like one in the long chaos soak was the
publisher itself stopped, on a full stderr pipe, see ``streams/app/lifecycle/log_setup.py``).
After ``OUTAGE_WAIT_S`` without progress the publisher fails. A record sent twice that way is a copy
with the same envelope id, which every writer downstream takes once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from datetime import datetime

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaConnectionError, KafkaTimeoutError
from aiokafka.structs import TopicPartition

from connectors.kafka.producer import acked_producer
from models import Envelope, EventKind, to_json
from models.kafka_settings import KafkaSettings
from models.progress import SourceProgress

log = logging.getLogger(__name__)

PROGRESS_EVERY = 500
"""Events between progress reports (and one when the input ends)."""
RESEND_ROUNDS = 5
"""New producers tried for records the broker refused before the publisher gives up."""
OUTAGE_WAIT_S = 600.0
"""How long a broker that takes nothing is waited out before the publisher fails: five of
aiokafka's request timeouts, well past a broker restart (45 s in the chaos soak) or a rolling
upgrade's broker, short enough that a broker gone for good is reported within minutes."""
RETRY_PAUSE_S = 1.0
"""Between failed starts of a new producer."""
FLUSH_WAIT_S = 180.0
"""Longest wait for the producer's flush: past its request timeout (120 s) every batch has
been sent or has failed, so a flush still waiting is a producer that takes nothing."""
STOP_WAIT_S = 30.0
"""Longest wait for a replaced producer to stop (one that takes nothing may never)."""


class PublishError(RuntimeError):
    """Records the broker kept refusing: the input is not all on the bus."""


@dataclass(frozen=True, slots=True)
class _Record:
    topic: str
    key: bytes
    value: bytes
    partition: int | None


@dataclass(frozen=True, slots=True)
class _Sent:
    record: _Record
    delivery: asyncio.Future[object]


class EventPublisher:
    def __init__(
        self,
        kafka: KafkaSettings,
        *,
        topic_of: dict[str, str],
        source: str = "publisher",
        progress_every: int = PROGRESS_EVERY,
        outage_wait_s: float = OUTAGE_WAIT_S,
    ) -> None:
        """``topic_of`` maps an event kind ("pod", "node", ...) to its full topic name;
        ``source`` names this publisher in its progress reports (one name per running
        publisher)."""
        self.kafka = kafka
        self.topic_of = topic_of
        self.source = source
        self.progress_every = progress_every
        self.outage_wait_s = outage_wait_s
        self.sent = 0
        self.progress_sent = 0
        self._last_time: datetime | None = None
        self._reported: datetime | None = None
        self._since_report = 0
        self._producer = self._new_producer()
        self._unsettled: list[_Sent] = []
        """Sent since the last check of their deliveries, in the order sent."""
        self.resent = 0

    def _new_producer(self) -> AIOKafkaProducer:
        return acked_producer(self.kafka, client_id="gpufrag-publisher", linger_ms=5)

    async def start(self) -> None:
        await self._producer.start()

    async def stop(self) -> None:
        try:
            await self.flush()
        finally:
            await self._producer.stop()

    async def publish(self, env: Envelope) -> None:
        """Send one event; events must come in event-time order (a replay, a watcher's
        stream): the progress reports promise that nothing earlier follows."""
        at = env.event_time
        last = self._last_time
        if last is not None and at < last:
            raise ValueError(
                f"event {env.id} at {at.isoformat()} is earlier than the previous "
                f"{last.isoformat()}: a publisher's events must be in event-time order"
            )
        if last is not None and at > last and self._since_report >= self.progress_every:
            await self.report_progress(last)
        if env.seq is None:
            env = env.model_copy(update={"seq": self.sent})
        topic = self.topic_of[env.kind.value]
        await self._send(topic, env.key.encode(), to_json(env), None)
        self.sent += 1
        self._since_report += 1
        self._last_time = at

    async def report_progress(self, upto: datetime | None = None) -> None:
        """Tell every partition of every input topic that events up to ``upto`` (default: the
        last one sent) are all sent. Called by ``publish`` now and then, and at the end."""
        upto = upto if upto is not None else self._last_time
        if upto is None or (self._reported is not None and upto <= self._reported):
            return
        progress = SourceProgress(
            source=self.source,
            upto=upto,
            kinds=tuple(EventKind(k) for k in sorted(self.topic_of)),
        )
        value = to_json(progress)
        # the events the report covers are acknowledged first: a batch the producer retries
        # after a broker restart (a new producer id, so idempotence no longer orders it) could
        # otherwise land after the report, and break its promise (events dead-lettered as late)
        await self.flush()
        for topic in sorted(set(self.topic_of.values())):
            for partition in sorted(await self._partitions(topic)):
                await self._send(topic, b"", value, partition)
                self.progress_sent += 1
        self._reported = upto
        self._since_report = 0

    async def _send(self, topic: str, key: bytes, value: bytes, partition: int | None) -> None:
        await self._hand_over([_Record(topic, key, value, partition)])

    async def _hand_over(self, records: list[_Record]) -> None:
        """Hand ``records`` to the producer in order. A producer that takes nothing for its
        request timeout is replaced, and what it had not confirmed goes to the new one first,
        in its order; ``PublishError`` after ``outage_wait_s``."""
        started = time.monotonic()
        queue = list(records)
        while queue:
            r = queue[0]
            try:
                delivery = await self._producer.send(
                    r.topic, key=r.key, value=r.value, partition=r.partition
                )
            except (KafkaTimeoutError, KafkaConnectionError) as exc:
                queue[:0] = await self._replace(f"a send to {r.topic}: {exc!r}", started)
                continue
            self._unsettled.append(_Sent(r, delivery))
            queue.pop(0)

    async def _partitions(self, topic: str) -> set[int]:
        started = time.monotonic()
        while True:
            try:
                return set(await self._producer.partitions_for(topic))
            except (KafkaTimeoutError, KafkaConnectionError) as exc:
                await self._hand_over(
                    await self._replace(f"partitions of {topic}: {exc!r}", started)
                )

    async def _replace(self, why: str, started: float) -> list[_Record]:
        """A new producer for one that took nothing (``why``), or whose records the broker
        refused; returns what the old one had not confirmed, in order, for the new one."""
        self._within_bound(why, started)
        log.warning("the producer takes nothing (%s; %s); starting a new one", why, self._leaders())
        old, self._producer = self._producer, self._new_producer()
        try:
            await asyncio.wait_for(old.stop(), STOP_WAIT_S)
        except TimeoutError:
            log.warning("the old producer did not stop in %.0f s; left behind", STOP_WAIT_S)
        unconfirmed = [s.record for s in self._unsettled if not _confirmed(s.delivery)]
        self._unsettled = []
        while True:
            try:
                await self._producer.start()
                break
            except (KafkaTimeoutError, KafkaConnectionError) as exc:
                self._within_bound(f"a new producer's start: {exc!r}", started)
                await asyncio.sleep(RETRY_PAUSE_S)
        self.resent += len(unconfirmed)
        return unconfirmed

    def _leaders(self) -> str:
        """Where the producer's metadata says its input partitions' leaders are, for the
        warning: a partition without one takes nothing, whichever producer sends to it."""
        cluster = self._producer.client.cluster
        unknown: list[str] = []
        led = 0
        for topic in sorted(set(self.topic_of.values())):
            for p in sorted(cluster.partitions_for_topic(topic) or ()):
                leader = cluster.leader_for_partition(TopicPartition(topic, p))
                if leader is None or leader < 0:
                    unknown.append(f"{topic}/{p}")
                else:
                    led += 1
        shown = ", ".join(unknown[:8]) + (" ..." if len(unknown) > 8 else "")
        return (
            f"{len(self._unsettled)} sent since the last check, {led} input partitions with a "
            f"leader, {len(unknown)} without{': ' + shown if unknown else ''}"
        )

    def _within_bound(self, why: str, started: float) -> None:
        """``PublishError`` once ``outage_wait_s`` has passed since ``started``."""
        waited_s = time.monotonic() - started
        if waited_s >= self.outage_wait_s:
            raise PublishError(
                f"the broker took nothing for {waited_s:.0f} s ({why}); {self.sent} events were "
                "sent before it, not all of the input is on the bus"
            )

    async def flush(self) -> None:
        """Until everything sent is on the broker: what it refused, or a producer that took
        longer than its request timeout left unconfirmed, is sent again, in order, by a new
        producer; ``PublishError`` once ``RESEND_ROUNDS`` new producers could not."""
        for round_ in range(RESEND_ROUNDS + 1):
            try:
                await asyncio.wait_for(self._producer.flush(), FLUSH_WAIT_S)
            except TimeoutError:
                why = f"its flush took over {FLUSH_WAIT_S:.0f} s"
            else:
                refused = [s for s in self._unsettled if _refused(s.delivery)]
                if not refused:
                    self._unsettled = []
                    return
                why = f"{len(refused)} refused, first {refused[0].delivery.exception()!r}"
            if round_ == RESEND_ROUNDS:
                raise PublishError(
                    f"the broker did not take the records {RESEND_ROUNDS + 1} times (last: "
                    f"{why}); not all of the input is on the bus"
                )
            await self._hand_over(await self._replace(why, time.monotonic()))


def _refused(delivery: asyncio.Future[object]) -> bool:
    return delivery.done() and not delivery.cancelled() and delivery.exception() is not None


def _confirmed(delivery: asyncio.Future[object]) -> bool:
    return delivery.done() and not delivery.cancelled() and delivery.exception() is None
