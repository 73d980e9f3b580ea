"""A Kafka consumer's surface as the topic sink uses it: prepared batches, counted commits."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass


@dataclass(frozen=True)
class TP:
    topic: str
    partition: int


@dataclass(frozen=True)
class Record:
    offset: int
    timestamp: int
    value: bytes


class Consumer:
    """Hands out prepared batches, then stops the sink; records what was committed."""

    def __init__(self, batches: list[dict[TP, list[Record]]], stop: asyncio.Event) -> None:
        self.batches = batches
        self.stop = stop
        self.commits = 0

    async def getmany(self, *, timeout_ms: int, max_records: int) -> dict[TP, list[Record]]:
        if not self.batches:
            self.stop.set()
            return {}
        return self.batches.pop(0)

    async def commit(self) -> None:
        self.commits += 1
