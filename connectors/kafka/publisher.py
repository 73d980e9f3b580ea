"""Publishing events onto the bus: one topic per kind, keyed by the envelope's key.

acks=all with idempotence, so a retried send cannot duplicate or reorder a partition; the
envelope's id makes every downstream write idempotent as well. Events get their position in
this publisher's order (``seq``), and the publisher reports its progress in event time to every
partition it writes (``models.progress``), so the workers can restore event-time order.
"""

from __future__ import annotations

from datetime import datetime

from connectors.kafka.producer import acked_producer
from models import Envelope, EventKind, to_json
from models.kafka_settings import KafkaSettings
from models.progress import SourceProgress

PROGRESS_EVERY = 500
"""Events between progress reports (and one when the input ends)."""


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
        self._producer = acked_producer(kafka, client_id="gpufrag-publisher", linger_ms=5)

    async def start(self) -> None:
        await self._producer.start()

    async def stop(self) -> None:
        await self._producer.stop()  # flushes what is in flight

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
        await self._producer.send(topic, key=env.key.encode(), value=to_json(env))
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
        await self._producer.flush()
        for topic in sorted(set(self.topic_of.values())):
            for partition in sorted(await self._producer.partitions_for(topic)):
                await self._producer.send(topic, key=b"", value=value, partition=partition)
                self.progress_sent += 1
        self._reported = upto
        self._since_report = 0

    async def flush(self) -> None:
        await self._producer.flush()
