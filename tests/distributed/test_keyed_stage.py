"""A stage partition read twice: the copy of an item still held is dropped unacknowledged, and
after a rewind (the stage forgets, as on a revocation) what it had released is recognised as
redelivered. The worker's consumer rewinds every stream partition after a rebalance
(``streams/distributed/transport.py``), so both happen on every rebalance; the broker tests
(tests/distributed/test_recovery.py) cover the rest with a real Faust worker.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from models import EventKind
from models.progress import SourceProgress
from streams.distributed.ordering import Watermarks
from streams.distributed.stage import Decoded, HeldInput, KeyedStage, StageCounters
from streams.instants import OrderKey

T0 = datetime(2023, 7, 1, tzinfo=UTC)


@dataclass(frozen=True)
class _Message:
    topic: str
    partition: int
    offset: int


@dataclass(frozen=True)
class _Event:
    message: _Message
    value: bytes


@dataclass
class _Stream:
    acked: list[int] = field(default_factory=list)

    async def ack(self, event: _Event) -> None:
        self.acked.append(event.message.offset)


@dataclass
class _Logic:
    """Items are ``item:<seconds>``, progress reports ``upto:<seconds>``."""

    name: str = "toy"
    applied: list[str] = field(default_factory=list)

    def decode(self, topic: str, raw: bytes) -> Decoded:
        kind, _, seconds = raw.decode().partition(":")
        at = T0 + timedelta(seconds=int(seconds))
        if kind == "upto":
            return SourceProgress(source="publisher", upto=at, kinds=(EventKind.POD,))
        return HeldInput(OrderKey(at, int(seconds), "publisher", raw.decode()), raw.decode())

    async def apply(self, order: OrderKey | None, item: object) -> None:
        self.applied.append(str(item))

    async def settle(self, p: int, upto: datetime) -> None:
        """Each item is whole once applied: nothing to settle."""

    async def report(self, p: int, upto: datetime) -> None:
        """No stage downstream."""

    def reset(self) -> None:
        """No operator state beside what ``applied`` records for the test."""


async def _rejected(event: Any, reason: str) -> None:
    raise AssertionError(f"dead-lettered: {reason}")


def _stage() -> tuple[KeyedStage, _Logic, StageCounters]:
    logic = _Logic()
    counters = StageCounters({})
    stage = KeyedStage(
        logic,
        table={},
        marks=lambda: Watermarks(topic_of_kind={EventKind.POD: "pods"}),
        reject=_rejected,
        counters=counters,
    )
    return stage, logic, counters


def _read(stage: KeyedStage, stream: _Stream, offset: int, raw: str) -> None:
    event = _Event(_Message("pods", 0, offset), raw.encode())
    asyncio.run(stage.on_event(stream, event))


def test_a_held_item_read_again_is_dropped_and_applied_once() -> None:
    stage, logic, counters = _stage()
    stream = _Stream()
    _read(stage, stream, 0, "item:10")
    _read(stage, stream, 1, "item:20")
    _read(stage, stream, 0, "item:10")  # the rewind's copy, while the first is still held
    assert counters.counts == {"read_twice": 1}
    assert stream.acked == []  # the copy is not acknowledged: its first delivery will be
    _read(stage, stream, 2, "upto:20")
    assert logic.applied == ["item:10", "item:20"]
    assert stream.acked == [0, 1]


def test_after_a_rewind_what_was_released_is_redelivered_and_what_was_held_is_read_afresh() -> None:
    stage, logic, counters = _stage()
    stream = _Stream()
    for offset, raw in enumerate(["item:10", "upto:10", "item:20"]):
        _read(stage, stream, offset, raw)
    assert logic.applied == ["item:10"]
    stage.revoked({0})  # what the worker does for each partition its consumer rewound
    for offset, raw in enumerate(["item:10", "upto:10", "item:20", "upto:20"]):
        _read(stage, stream, offset, raw)
    assert logic.applied == ["item:10", "item:20"]
    assert counters.counts["redelivered"] == 1
    assert "read_twice" not in counters.counts
