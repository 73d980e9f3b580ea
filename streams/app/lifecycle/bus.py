"""Where the Kafka bus is, how to connect to it, and the topics on it, resolved the same way by
every command."""

from __future__ import annotations

from dataclasses import dataclass

from connectors.kafka.admin import TopicRequest, ensure_topics
from models.kafka_settings import KafkaSettings
from streams.app.lifecycle.settings_load import load_settings
from streams.distributed import topics


@dataclass(frozen=True, slots=True)
class Bus:
    kafka: KafkaSettings
    """The connection (bootstrap, TLS, SASL) every client of the command is built from."""
    prefix: str

    @property
    def bootstrap(self) -> str:
        return self.kafka.bootstrap

    @classmethod
    def resolve(cls, bootstrap: str | None, prefix: str | None) -> Bus:
        """Command-line options win over GPUFRAG_KAFKA__* settings."""
        k = load_settings().kafka
        return cls(kafka=k.at(bootstrap), prefix=k.topic_prefix if prefix is None else prefix)

    def topic_requests(self, *, app_id: str | None = None) -> list[TopicRequest]:
        """The bus's topics, and with ``app_id`` the changelogs of that worker group's tables."""
        # the one-partition topics are the cluster view's, read together by one worker
        out = [
            TopicRequest(t.full_name(self.prefix), t.partitions, t.configs, t.partitions == 1)
            for t in topics.ALL
        ]
        if app_id is not None:
            out += [
                TopicRequest(t.name, t.partitions, t.configs)
                for t in (*topics.changelogs(app_id), topics.state_schema(app_id))
            ]
        return out

    async def ensure_topics(self, *, app_id: str | None = None) -> list[str]:
        return await ensure_topics(self.kafka, self.topic_requests(app_id=app_id))
