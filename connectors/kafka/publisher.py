"""Publishing events onto the bus: one topic per kind, keyed by the envelope's key.

acks=all with idempotence, so a retried send cannot duplicate or reorder a partition; the
envelope's id makes every downstream write idempotent as well.
"""

from __future__ import annotations

from aiokafka import AIOKafkaProducer

from models import Envelope, to_json


class EventPublisher:
    def __init__(self, bootstrap: str, *, topic_of: dict[str, str]) -> None:
        """``topic_of`` maps an event kind ("pod", "node", ...) to its full topic name."""
        self.topic_of = topic_of
        self.sent = 0
        self._producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            client_id="gpufrag-publisher",
            acks="all",
            enable_idempotence=True,
            linger_ms=5,
            request_timeout_ms=30000,
        )

    async def start(self) -> None:
        await self._producer.start()

    async def stop(self) -> None:
        await self._producer.stop()  # flushes what is in flight

    async def publish(self, env: Envelope) -> None:
        topic = self.topic_of[env.kind.value]
        await self._producer.send(topic, key=env.key.encode(), value=to_json(env))
        self.sent += 1

    async def flush(self) -> None:
        await self._producer.flush()
