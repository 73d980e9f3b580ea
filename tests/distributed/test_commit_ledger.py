"""Where the worker may commit an input partition: up to the first offset every stage that reads
its topic has finished, never past one a stage has not seen (a message Faust skipped during a
rebalance), and never below where the consumer starts reading."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from streams.distributed.offsets import CommitLedger

READERS = {"pods": ["tasks"], "events": ["tasks", "nodes"]}


@dataclass(frozen=True)
class Case:
    name: str
    steps: list[tuple[str, ...]]
    """("start", topic, offset), ("forget", topic) or ("done", stage, topic, offset)."""
    safe: dict[str, int | None]


CASES = [
    Case(
        "contiguous offsets advance",
        [("start", "pods", "0")] + [("done", "tasks", "pods", str(o)) for o in (0, 1, 2)],
        {"pods": 3},
    ),
    Case(
        "an offset no stage finished holds the commit behind it",
        [("start", "pods", "0"), ("done", "tasks", "pods", "0"), ("done", "tasks", "pods", "2")],
        {"pods": 1},
    ),
    Case(
        "the hole filled, the commit moves past everything finished",
        [
            ("start", "pods", "0"),
            ("done", "tasks", "pods", "0"),
            ("done", "tasks", "pods", "2"),
            ("done", "tasks", "pods", "1"),
        ],
        {"pods": 3},
    ),
    Case(
        "a topic read by two stages needs both",
        [("start", "events", "5"), ("done", "tasks", "events", "5")],
        {"events": 5},
    ),
    Case(
        "one stage twice is still one",
        [("start", "events", "5"), ("done", "tasks", "events", "5")] * 2,
        {"events": 5},
    ),
    Case(
        "both stages",
        [
            ("start", "events", "5"),
            ("done", "nodes", "events", "5"),
            ("done", "tasks", "events", "5"),
        ],
        {"events": 6},
    ),
    Case(
        "finished before the consumer said where it starts: counted once it does",
        [("done", "tasks", "pods", "7"), ("done", "tasks", "pods", "8"), ("start", "pods", "7")],
        {"pods": 9},
    ),
    Case(
        "a word from before a revocation is not counted in the next assignment",
        [
            ("start", "pods", "67"),
            ("forget", "pods"),
            *(("done", "tasks", "pods", str(o)) for o in range(67, 105)),
            ("start", "pods", "67"),
        ],
        {"pods": 67},
    ),
    Case(
        "nothing committable before the start is known",
        [("done", "tasks", "pods", "0")],
        {"pods": None},
    ),
    Case(
        "a commit below the log's start reads from the start",
        [("start", "pods", "40"), ("done", "tasks", "pods", "12"), ("done", "tasks", "pods", "40")],
        {"pods": 41},
    ),
    Case(
        "a stage that does not read the topic says nothing about it",
        [("start", "pods", "0"), ("done", "nodes", "pods", "0")],
        {"pods": 0},
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_committable_offset(case: Case) -> None:
    ledger = CommitLedger(READERS)
    for step in case.steps:
        if step[0] == "start":
            ledger.start(step[1], 0, int(step[2]))
        elif step[0] == "forget":
            ledger.forget(step[1], 0)
        else:
            ledger.done(step[1], step[2], 0, int(step[3]))
    assert {t: ledger.safe(t, 0) for t in case.safe} == case.safe


def test_only_partitions_past_their_last_commit_are_offered() -> None:
    ledger = CommitLedger(READERS)
    ledger.start("pods", 0, 10)
    ledger.start("pods", 1, 0)
    assert list(ledger.committable()) == []  # nothing finished: both resume where they are
    ledger.done("tasks", "pods", 0, 10)
    assert list(ledger.committable()) == [(("pods", 0), 11)]
    ledger.committed("pods", 0, 11)
    assert list(ledger.committable()) == []
    assert ledger.commits() == {("pods", 0): 11, ("pods", 1): 0}


def test_a_topic_no_stage_reads_is_not_held() -> None:
    ledger = CommitLedger(READERS)
    ledger.start("app-__assignor-__leader", 0, 0)
    assert ledger.commits() == {}


def test_a_revoked_partition_is_forgotten() -> None:
    ledger = CommitLedger(READERS)
    ledger.start("pods", 0, 0)
    ledger.done("tasks", "pods", 0, 0)
    ledger.forget("pods", 0)
    assert ledger.safe("pods", 0) is None
    assert list(ledger.committable()) == []
