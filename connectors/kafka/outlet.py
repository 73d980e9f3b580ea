"""The Kafka side of a live stage (``connectors.live_stage``)."""

from __future__ import annotations

from datetime import datetime

from aiokafka import AIOKafkaProducer

from connectors.kafka.producer import acked_producer
from connectors.kafka.publisher import EventPublisher
from models import Envelope, to_json

__all__ = ["PublisherOutlet"]


class PublisherOutlet:
    """The Kafka side of a live stage: events in order and progress through the source's
    ``EventPublisher``; late events through a producer of their own that reports no progress,
    since the publisher rightly refuses an event older than the last one it sent."""

    def __init__(self, publisher: EventPublisher) -> None:
        self.publisher = publisher
        self.late_sent = 0
        self._late: AIOKafkaProducer | None = None

    async def start(self) -> None:
        await self.publisher.start()

    async def send(self, env: Envelope) -> None:
        await self.publisher.publish(env)

    async def send_late(self, env: Envelope) -> None:
        if self._late is None:  # rare: started on first use, not for every source
            # the publisher's connection settings: same broker, same credentials
            producer = acked_producer(self.publisher.kafka, client_id="gpufrag-publisher-late")
            await producer.start()
            self._late = producer
        topic = self.publisher.topic_of[env.kind.value]
        await self._late.send(topic, key=env.key.encode(), value=to_json(env))
        self.late_sent += 1

    async def progress(self, upto: datetime) -> None:
        await self.publisher.report_progress(upto)

    async def stop(self) -> None:
        """Flush and close both producers (what is in flight is delivered first)."""
        try:
            if self._late is not None:
                await self._late.stop()
        finally:
            await self.publisher.stop()
