"""Faust's Kafka transport with every producer idempotent and acks=all.

Faust turns idempotence on only inside transactions; at-least-once processing still wants it, so
a retried produce never duplicates or reorders a partition. Registered as the ``gpufrag://``
broker scheme through Faust's own transport entry point (see pyproject.toml).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from faust.transport.drivers import aiokafka as faust_aiokafka


class IdempotentProducer(faust_aiokafka.Producer):
    def _settings_extra(self) -> Mapping[str, Any]:
        return {"acks": "all", "enable_idempotence": True}


class Transport(faust_aiokafka.Transport):
    Producer: ClassVar[type] = IdempotentProducer
