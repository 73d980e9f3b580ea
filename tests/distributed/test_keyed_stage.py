"""A stage partition read twice: the copy of an item still held is dropped unacknowledged, and
after a rewind (the stage forgets, as on a revocation) what it had released is recognised as
redelivered. After a rebalance the worker's consumer reads each stream partition again from
its commit, or from its start without one (``streams/distributed/transport.py``), so both
happen on every rebalance. And where the worker may commit (``streams/distributed/offsets.py``):
never past what a stage holds or has not yet settled. The broker tests
(tests/distributed/test_recovery.py, test_resume_from_commit.py) cover the rest with a real
Faust worker.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from models import EventKind
from models.progress import SourceProgress
from streams.distributed.offsets import CommitLedger
from streams.distributed.ordering import Watermarks
from streams.distributed.stage import Decoded, HeldInput, KeyedStage, Reject, StageCounters
from streams.instants import OrderKey
from tests.distributed.stage_events import StageEvent, StageMessage

T0 = datetime(2023, 7, 1, tzinfo=UTC)


@dataclass
class _Stream:
    acked: list[int] = field(default_factory=list)

    async def ack(self, event: StageEvent) -> None:
        self.acked.append(event.message.offset)


@dataclass
class _Logic:
    """Items are ``item:<seconds>``, progress reports ``upto:<seconds>`` (and a second
    source's ``late-upto:<seconds>``); anything else is refused."""

    name: str = "toy"
    applied: list[str] = field(default_factory=list)
    ledger: CommitLedger | None = None
    safe_when_settling: list[int | None] = field(default_factory=list)
    """Where the partition could be committed each time a release settled."""

    def decode(self, topic: str, raw: bytes) -> Decoded:
        kind, _, seconds = raw.decode().partition(":")
        at = T0 + timedelta(seconds=int(seconds))
        if kind == "upto":
            return SourceProgress(source="publisher", upto=at, kinds=(EventKind.POD,))
        if kind == "late-upto":  # a second source, behind the first
            return SourceProgress(source="watcher", upto=at, kinds=(EventKind.POD,))
        if kind != "item":
            raise ValueError(f"not ours: {raw!r}")
        return HeldInput(OrderKey(at, int(seconds), "publisher", raw.decode()), raw.decode())

    async def apply(self, order: OrderKey, item: object) -> None:
        self.applied.append(str(item))

    async def settle(self, p: int, upto: datetime) -> None:
        """What a release applied is in the state only now (as the cluster view's instants)."""
        if self.ledger is not None:
            self.safe_when_settling.append(self.ledger.safe("pods", p))

    async def report(self, p: int, upto: datetime) -> None:
        """No stage downstream."""

    def reset(self) -> None:
        """No operator state beside what ``applied`` records for the test."""


async def _rejected(event: Any, reason: str) -> None:
    raise AssertionError(f"dead-lettered: {reason}")


def _stage(reject: Reject = _rejected) -> tuple[KeyedStage, _Logic, StageCounters]:
    ledger = CommitLedger({"pods": ["toy"]})
    ledger.start("pods", 0, 0)
    logic = _Logic(ledger=ledger)
    counters = StageCounters({})
    stage = KeyedStage(
        logic,
        table={},
        marks=lambda: Watermarks(topic_of_kind={EventKind.POD: "pods"}),
        reject=reject,
        counters=counters,
        ledger=ledger,
    )
    return stage, logic, counters


def _refusing_stage() -> tuple[KeyedStage, _Logic, StageCounters, list[str]]:
    """A stage whose dead letters are kept (their reasons) rather than failing the test."""
    refused: list[str] = []

    async def reject(event: Any, reason: str) -> None:
        refused.append(reason)

    return (*_stage(reject), refused)


def _read(stage: KeyedStage, stream: _Stream, offset: int, raw: str) -> None:
    event = StageEvent(StageMessage("pods", 0, offset), raw.encode())
    asyncio.run(stage.on_event(stream, event))


def test_a_held_item_read_again_is_dropped_and_applied_once() -> None:
    stage, logic, counters = _stage()
    stream = _Stream()
    _read(stage, stream, 0, "item:10")
    _read(stage, stream, 1, "item:20")
    _read(stage, stream, 0, "item:10")  # the rewind's copy, while the first is still held
    assert counters.counts == {"read": 3, "read_twice": 1}
    assert stream.acked == []  # the copy is not acknowledged: its first delivery will be
    _read(stage, stream, 2, "upto:20")
    assert logic.applied == ["item:10", "item:20"]
    assert stream.acked == [2, 0, 1]


def test_a_copy_sent_again_in_a_record_of_its_own_is_dropped_finished_and_applied_once() -> None:
    """The publisher replaced a producer that took nothing and sent again what it had not
    confirmed, some of which the old one had written: the same envelopes at new offsets,
    before the progress report that releases them. Each is applied once; the copies are
    finished at once (acknowledged, so they hold back no commit), the firsts on release."""
    stage, logic, counters = _stage()
    stream = _Stream()
    for offset, raw in enumerate(["item:10", "item:20", "item:10", "item:20", "item:30"]):
        _read(stage, stream, offset, raw)
    assert counters.counts == {"read": 5, "copies": 2}
    assert stream.acked == [2, 3]
    assert stage.ledger.safe("pods", 0) == 0  # the firsts still held: nothing past them
    _read(stage, stream, 5, "upto:30")
    assert logic.applied == ["item:10", "item:20", "item:30"]
    assert sorted(stream.acked) == [0, 1, 2, 3, 4, 5]
    assert stage.ledger.safe("pods", 0) == 6
    # the same envelope once released, then read at a new offset by this owner: a broken
    # promise (the publisher checks every delivery before its next report), never a copy
    stage2, logic2, _, refused = _refusing_stage()
    for offset, raw in enumerate(["item:10", "upto:10", "item:10"]):
        _read(stage2, stream, offset, raw)
    assert logic2.applied == ["item:10"]
    assert [r.split(":")[0] for r in refused] == ["late"]


def test_a_released_item_read_again_by_its_owner_is_a_copy_not_a_late_event() -> None:
    """The consumer went back to the commit (Faust seeks more than once per rebalance) after
    the stage had released past an item: the second read is a copy, never dead-lettered."""
    stage, logic, counters = _stage()
    stream = _Stream()
    for offset, raw in enumerate(["item:10", "upto:5", "item:20", "upto:20"]):
        _read(stage, stream, offset, raw)
    assert logic.applied == ["item:10", "item:20"]
    for offset, raw in enumerate(["item:10", "upto:5", "item:20", "upto:20"]):
        _read(stage, stream, offset, raw)
    assert logic.applied == ["item:10", "item:20"]
    assert counters.counts["redelivered"] == 2


def test_an_item_below_the_first_offset_read_is_never_taken_for_a_copy() -> None:
    """The chaos soak under load: a new worker's consumer handed its stage a progress report
    at 112 before the seek to the commit, 65; the stage released past the items at 65 to 111
    and then dropped them as copies. The consumer no longer hands such a record on
    (``positions.py``); had it, the items are refused as late, loudly."""
    stage, logic, counters, refused = _refusing_stage()
    stream = _Stream()
    _read(stage, stream, 112, "upto:30")
    _read(stage, stream, 65, "item:10")
    _read(stage, stream, 112, "upto:30")  # read again after it: a copy
    assert logic.applied == []
    assert [r.split(":")[0] for r in refused] == ["late"]
    assert "redelivered" not in counters.counts


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


def _committable(stage: KeyedStage) -> int | None:
    return stage.ledger.safe("pods", 0)


def test_the_commit_stops_at_held_input_and_passes_a_report_once_its_progress_is_saved() -> None:
    stage, logic, _ = _stage()
    stream = _Stream()
    for offset, raw in enumerate(["item:10", "item:20", "upto:10"]):
        _read(stage, stream, offset, raw)
    assert logic.applied == ["item:10"]
    assert _committable(stage) == 1  # item:20 is held
    _read(stage, stream, 3, "upto:20")
    assert logic.applied == ["item:10", "item:20"]
    assert _committable(stage) == 4
    saved = orjson.loads(stage.table[b"~progress/0"])
    # each channel with where its report was read: a successor trusts it only below its start
    assert saved["upto"] == [["publisher", "pods", (T0 + timedelta(seconds=20)).isoformat(), 3]]


def test_a_release_is_committable_only_after_it_settled_and_its_mark_was_written() -> None:
    stage, logic, _ = _stage()
    stream = _Stream()
    for offset, raw in enumerate(["item:10", "item:20", "upto:20", "item:30", "upto:30"]):
        _read(stage, stream, offset, raw)
    # while the first release settled, nothing of it could be committed; while the second
    # did, the first release and its report, up to item:30 at offset 3
    assert logic.safe_when_settling == [0, 3]
    assert stage.table[b"~released/0"] == (T0 + timedelta(seconds=30)).isoformat().encode()
    assert _committable(stage) == 5


def test_a_dead_lettered_message_is_committable_at_once() -> None:
    stage, _, counters, refused = _refusing_stage()
    stream = _Stream()
    _read(stage, stream, 0, "junk:1")
    _read(stage, stream, 1, "junk:2")
    assert len(refused) == 2 and all("not ours" in r for r in refused)
    assert _committable(stage) == 2
    assert counters.counts["read"] == 2


def test_a_revoked_partitions_held_input_is_never_committed() -> None:
    stage, _, _ = _stage()
    stream = _Stream()
    for offset, raw in enumerate(["item:10", "upto:10", "item:20", "item:30"]):
        _read(stage, stream, offset, raw)
    stage.revoked({0})
    _read(stage, stream, 4, "upto:30")  # the next owner's report, past the forgotten input
    assert _committable(stage) == 2


def test_a_restarted_stage_resumes_from_the_saved_progress() -> None:
    """Two sources: the second reported once, far ahead, and stopped. Its report was committed
    past, so a restarted stage never reads it again, and still releases on the first source's
    reports alone; what was released before the restart is not read again at all."""
    stage, logic, _ = _stage()
    stream = _Stream()
    for offset, raw in enumerate(["item:10", "upto:10", "late-upto:40", "item:20", "upto:30"]):
        _read(stage, stream, offset, raw)
    assert logic.applied == ["item:10", "item:20"]
    assert _committable(stage) == 5
    stage.revoked({0})  # the worker restarts; its successor reads from the commit
    stage.ledger.forget("pods", 0)
    stage.ledger.start("pods", 0, 5)
    _read(stage, stream, 5, "item:35")
    _read(stage, stream, 6, "upto:40")
    assert logic.applied == ["item:10", "item:20", "item:35"]
    assert _committable(stage) == 7
