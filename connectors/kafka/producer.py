"""The one producer configuration every gpufrag writer uses."""

from __future__ import annotations

from aiokafka import AIOKafkaProducer

__all__ = ["acked_producer"]


def acked_producer(bootstrap: str, *, client_id: str, linger_ms: int = 0) -> AIOKafkaProducer:
    """acks=all with idempotence, so a retried send can neither duplicate nor reorder a
    partition; a broker restart or a short outage is waited out (120 s), not turned into lost
    events."""
    return AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        client_id=client_id,
        acks="all",
        enable_idempotence=True,
        linger_ms=linger_ms,
        request_timeout_ms=120_000,
    )
