"""What a keyed stage reads, without Faust: a message's place and value, as a Faust event
carries them (``event.message.topic/partition/offset``, ``event.value``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StageMessage:
    topic: str
    partition: int
    offset: int


@dataclass(frozen=True)
class StageEvent:
    message: StageMessage
    value: bytes
