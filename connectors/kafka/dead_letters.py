"""Refused inputs onto the dead-letter topic, where `gpufrag sink` keeps them in the store.

A refusal travels as the ``Refusal`` model's JSON, so the sink tells it from a worker's dead
letter (which names the topic, partition and offset it came from) by its ``source`` field.
"""

from __future__ import annotations

from collections.abc import Sequence

from connectors.kafka.producer import acked_producer
from models import to_json
from models.kafka_settings import KafkaSettings
from models.refusal import Refusal

__all__ = ["DeadLetterProducer"]


class DeadLetterProducer:
    def __init__(self, kafka: KafkaSettings, *, topic: str) -> None:
        self.topic = topic
        self.sent = 0
        self._producer = acked_producer(kafka, client_id="gpufrag-dead-letters")

    async def start(self) -> None:
        await self._producer.start()

    async def stop(self) -> None:
        await self._producer.stop()  # flushes what is in flight

    async def send(self, refusals: Sequence[Refusal]) -> None:
        # one at a time, each acknowledged: refusals are few, and a failed send must raise
        # (the pump logs it) rather than count as sent
        for refusal in refusals:
            await self._producer.send_and_wait(
                self.topic, key=refusal.source.encode(), value=to_json(refusal)
            )
            self.sent += 1
