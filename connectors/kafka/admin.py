"""Creating the declared topics with the settings a real cluster would use, idempotently."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError

from connectors.kafka.security import client_kwargs
from models.kafka_settings import KafkaSettings


async def _partition_counts(
    admin: AIOKafkaAdminClient, names: list[str], created: list[str]
) -> dict[str, int]:
    """Partitions per topic; a topic created a moment ago may show none until the broker's
    metadata has caught up, so those are asked again for a while."""
    counts: dict[str, int] = {}
    for _ in range(50):
        described = await admin.describe_topics(names)
        counts = {d["topic"]: len(d["partitions"]) for d in described}
        if all(counts.get(n, 0) > 0 for n in created):
            break
        await asyncio.sleep(0.2)
    return counts


class TopicMismatch(RuntimeError):
    """An existing topic has fewer partitions than declared: keyed state would move."""


@dataclass(frozen=True, slots=True)
class TopicRequest:
    name: str
    partitions: int
    configs: Mapping[str, str]
    exact: bool = False
    """More partitions than declared is an error too: a topic read together with another by
    one partition's owner (Faust assigns topics of equal partition counts together)."""


async def ensure_topics(kafka: KafkaSettings, topics: Iterable[TopicRequest]) -> list[str]:
    """Create the missing topics (with ``kafka.replication``); returns the names created now.
    Existing topics are checked, not altered: a partition count below the declared one (or
    other than it, for an ``exact`` request) is an error, never silently used."""
    wanted = list(topics)
    admin = AIOKafkaAdminClient(**client_kwargs(kafka), client_id="gpufrag-admin")
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        new = [
            NewTopic(
                name=t.name,
                num_partitions=t.partitions,
                replication_factor=kafka.replication,
                topic_configs=dict(t.configs),
            )
            for t in wanted
            if t.name not in existing
        ]
        created: list[str] = []
        if new:
            try:
                await admin.create_topics(new)
                created = [t.name for t in new]
            except TopicAlreadyExistsError:  # a concurrent creator won: check below
                created = []
        counts = await _partition_counts(admin, [t.name for t in wanted], created)
        short = [
            f"{t.name} has {counts.get(t.name, 0)} partitions, {t.partitions} declared"
            for t in wanted
            if counts.get(t.name, 0) < t.partitions
            or (t.exact and counts.get(t.name, 0) != t.partitions)
        ]
        if short:
            raise TopicMismatch("; ".join(short))
        return created
    finally:
        await admin.close()
