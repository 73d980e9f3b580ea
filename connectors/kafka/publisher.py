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
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import datetime

from aiokafka import AIOKafkaProducer

from connectors.kafka.producer import acked_producer
from models import Envelope, EventKind, to_json
from models.kafka_settings import KafkaSettings
from models.progress import SourceProgress

log = logging.getLogger(__name__)

PROGRESS_EVERY = 500
"""Events between progress reports (and one when the input ends)."""
RESEND_ROUNDS = 5
"""New producers tried for records the broker refused before the publisher gives up."""


class PublishError(RuntimeError):
    """Records the broker kept refusing: the input is not all on the bus."""


@dataclass(frozen=True, slots=True)
class _Sent:
    topic: str
    key: bytes
    value: bytes
    partition: int | None
    delivery: asyncio.Future[object]


class EventPublisher:
    def __init__(
        self,
        kafka: KafkaSettings,
        *,
        topic_of: dict[str, str],
        source: str = "publisher",
        progress_every: int = PROGRESS_EVERY,
    ) -> None:
        """``topic_of`` maps an event kind ("pod", "node", ...) to its full topic name;
        ``source`` names this publisher in its progress reports (one name per running
        publisher)."""
        self.kafka = kafka
        self.topic_of = topic_of
        self.source = source
        self.progress_every = progress_every
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
            for partition in sorted(await self._producer.partitions_for(topic)):
                await self._send(topic, b"", value, partition)
                self.progress_sent += 1
        self._reported = upto
        self._since_report = 0

    async def _send(self, topic: str, key: bytes, value: bytes, partition: int | None) -> None:
        delivery = await self._producer.send(topic, key=key, value=value, partition=partition)
        self._unsettled.append(_Sent(topic, key, value, partition, delivery))

    async def flush(self) -> None:
        """Until everything sent is on the broker: what it refused is sent again, in order, by a
        new producer; ``PublishError`` once ``RESEND_ROUNDS`` new producers could not."""
        for round_ in range(RESEND_ROUNDS + 1):
            await self._producer.flush()
            refused = [r for r in self._unsettled if _refused(r.delivery)]
            self._unsettled = []
            if not refused:
                return
            first = f"{refused[0].topic}: {refused[0].delivery.exception()!r}"
            if round_ == RESEND_ROUNDS:
                raise PublishError(
                    f"the broker refused {len(refused)} records {RESEND_ROUNDS + 1} times "
                    f"(first: {first}); not all of the input is on the bus"
                )
            log.warning(
                "the broker refused %d records (first: %s); sending them again with a new producer",
                len(refused),
                first,
            )
            await self._producer.stop()
            self._producer = self._new_producer()
            await self._producer.start()
            for r in refused:
                await self._send(r.topic, r.key, r.value, r.partition)
            self.resent += len(refused)


def _refused(delivery: asyncio.Future[object]) -> bool:
    return delivery.done() and not delivery.cancelled() and delivery.exception() is not None
