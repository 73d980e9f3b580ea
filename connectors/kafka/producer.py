"""The one producer configuration every gpufrag writer uses."""

from __future__ import annotations

from aiokafka import AIOKafkaProducer

from connectors.kafka.security import client_kwargs
from models.kafka_settings import KafkaSettings

__all__ = ["acked_producer"]


def acked_producer(kafka: KafkaSettings, *, client_id: str, linger_ms: int = 0) -> AIOKafkaProducer:
    """acks=all with idempotence, so a retried send can neither duplicate nor reorder a
    partition; a broker restart or a short outage is waited out (120 s), not turned into lost
    events. Connects as ``kafka`` says (bootstrap, TLS, SASL)."""
    return AIOKafkaProducer(
        **client_kwargs(kafka),
        client_id=client_id,
        acks="all",
        enable_idempotence=True,
        linger_ms=linger_ms,
        request_timeout_ms=120_000,
    )
