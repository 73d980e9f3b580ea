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

A broker that takes nothing at all (down, or unreachable) is waited out for ``OUTAGE_WAIT_S``:
aiokafka's own wait ends after its request timeout (120 s) with a ``KafkaTimeoutError`` from
``send`` once its buffer is full, and a broker outage in the long chaos soak (a stop and a
network cut in a row, beside a CI run) outlasted it: the publisher died with the input half on
the bus. A send that timed out added nothing, so sending the record again keeps the order.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import TypeVar

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaConnectionError, KafkaTimeoutError

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
"""Between a failed call and the next try (each failed try already waited its timeout)."""

T = TypeVar("T")


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
            partitions = await self._patiently(
                f"partitions of {topic}", partial(self._producer.partitions_for, topic)
            )
            for partition in sorted(partitions):
                await self._send(topic, b"", value, partition)
                self.progress_sent += 1
        self._reported = upto
        self._since_report = 0

    async def _send(self, topic: str, key: bytes, value: bytes, partition: int | None) -> None:
        delivery = await self._patiently(
            f"a send to {topic}",
            lambda: self._producer.send(topic, key=key, value=value, partition=partition),
        )
        self._unsettled.append(_Sent(topic, key, value, partition, delivery))

    async def _patiently(self, what: str, call: Callable[[], Awaitable[T]]) -> T:
        """``call`` again while the broker takes nothing, for up to ``outage_wait_s``."""
        started = time.monotonic()
        while True:
            try:
                return await call()
            except (KafkaTimeoutError, KafkaConnectionError) as exc:
                waited_s = time.monotonic() - started
                if waited_s >= self.outage_wait_s:
                    raise PublishError(
                        f"the broker took nothing for {waited_s:.0f} s ({what}: {exc!r}); "
                        f"{self.sent} events were sent before it, not all of the input is on "
                        "the bus"
                    ) from exc
                log.warning(
                    "the broker takes nothing (%s: %r); waited %.0f s of %.0f, trying again",
                    what,
                    exc,
                    waited_s,
                    self.outage_wait_s,
                )
                await asyncio.sleep(RETRY_PAUSE_S)

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
            await self._patiently("a new producer's start", self._producer.start)
            for r in refused:
                await self._send(r.topic, r.key, r.value, r.partition)
            self.resent += len(refused)


def _refused(delivery: asyncio.Future[object]) -> bool:
    return delivery.done() and not delivery.cancelled() and delivery.exception() is not None
