"""Where a new alerter group starts: the signals open now per partition, the history skipped and
counted, a partition still being caught up never committed, a group's commit resumed from as
before, and a rebalance in the middle starting the catch-up again without counting twice.
Against an in-memory consumer; tests/distributed/test_alert_from_now.py runs the real broker.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

from aiokafka import TopicPartition
from prometheus_client import CollectorRegistry

from models import Signal, to_json
from streams.app.sinks.alert_catch_up import OpenSetCatchUp
from streams.app.sinks.alert_feed import AlertFeed
from tests.connectors.alerts.alerting import OPENED, DeadLetters, metric, storm, until

TOPIC = "t.gpufrag.signals"


def tp(partition: int) -> TopicPartition:
    return TopicPartition(TOPIC, partition)


def reopened(node: str, after_s: float) -> Signal:
    return Signal.model_validate(
        {**dict(storm(node)), "opened_at": OPENED + timedelta(seconds=after_s)}
    )


def restated(node: str, summary: str) -> Signal:
    return Signal.model_validate({**dict(storm(node)), "summary": summary})


HISTORY = [
    storm("a"),
    storm("b"),
    storm("a", resolved_after_s=10),
    restated("b", "b, worse"),  # b's latest state: the one sent
    storm("c"),
    storm("c", resolved_after_s=10),
    reopened("c", 60),  # a new episode of c: open now
    storm("d"),
    storm("d", resolved_after_s=10),
    storm("d"),  # a late copy of d's resolved episode: not open
    storm("c", resolved_after_s=10),  # a late copy of c's first resolution: c stays open
]
"""Open now: b (as restated) and c (reopened). Skipped: a's 2, c's first episode 2, d's 3 as
resolved; b's first state and c's late resolution as superseded."""


def test_the_open_set_is_the_latest_open_state_of_each_fingerprint() -> None:
    registry = CollectorRegistry()
    catch_up = OpenSetCatchUp(registry=registry)
    catch_up.begin(tp(0), end=len(HISTORY))
    for signal in HISTORY:
        catch_up.hold(tp(0), signal)
    opens = catch_up.finish(tp(0))
    assert [(s.scope_id, s.summary, s.opened_at) for s in opens] == [
        ("b", "b, worse", OPENED),
        ("c", storm("c").summary, OPENED + timedelta(seconds=60)),
    ]
    assert catch_up.counts == {"open_sent": 2, "resolved": 7, "superseded": 2}
    name = "gpufrag_alerts_history_skipped_total"
    assert metric(registry, name, reason="resolved") == 7
    assert metric(registry, name, reason="superseded") == 2
    assert catch_up.end_of(tp(0)) is None


class FakeDispatcher:
    def __init__(self) -> None:
        self.sent: list[Signal] = []

    def submit(self, signal: Signal) -> bool:
        self.sent.append(signal)
        return True

    async def settled(self) -> None:
        return None


class FakeConsumer:
    """A consumer of one topic with every partition assigned, handing out ``chunk`` records
    per partition per poll, so a catch-up spans several batches."""

    def __init__(self, logs: dict[int, list[bytes]], committed: dict[int, int], chunk: int = 2):
        self.logs = {tp(p): records for p, records in logs.items()}
        self.commits: dict[TopicPartition, int] = {tp(p): o for p, o in committed.items()}
        self.commit_calls: list[dict[TopicPartition, int]] = []
        self.positions = {t: self.commits.get(t, 0) for t in self.logs}
        self.chunk = chunk
        self.polls = 0
        self.before_poll: Callable[[int], None] = lambda n: None
        self.listener: Any = None

    def assignment(self) -> set[TopicPartition]:
        return set(self.logs)

    async def committed(self, t: TopicPartition) -> int | None:
        return self.commits.get(t)

    async def end_offsets(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        return {t: len(self.logs[t]) for t in tps}

    async def position(self, t: TopicPartition) -> int:
        return self.positions[t]

    async def commit(self, offsets: dict[TopicPartition, int]) -> None:
        self.commit_calls.append(dict(offsets))
        self.commits.update(offsets)

    async def getmany(self, *, timeout_ms: int, max_records: int) -> dict[TopicPartition, Any]:
        self.polls += 1
        self.before_poll(self.polls)
        batch = {}
        for t, records in self.logs.items():
            start = self.positions[t]
            got = records[start : start + self.chunk]
            if got:
                batch[t] = [SimpleNamespace(offset=start + i, value=v) for i, v in enumerate(got)]
                self.positions[t] = start + len(got)
        if not batch:
            await asyncio.sleep(0.01)  # the poll's timeout, shortened
        return batch

    def rebalance(self) -> None:
        """Every partition revoked and assigned again: positions back to the commits."""
        everything = set(self.logs)
        self.listener.on_partitions_revoked(everything)
        self.positions = {t: self.commits.get(t, 0) for t in self.logs}
        self.listener.on_partitions_assigned(everything)


async def feeding(
    consumer: FakeConsumer, *, from_beginning: bool, until_sent: int
) -> tuple[AlertFeed, FakeDispatcher]:
    dispatcher = FakeDispatcher()
    feed = AlertFeed(
        consumer=consumer,
        dispatcher=dispatcher,  # type: ignore[arg-type]
        dead_letter=DeadLetters(),
        from_beginning=from_beginning,
        registry=CollectorRegistry(),
    )
    consumer.listener = feed.rebalance_listener()
    stop = asyncio.Event()
    task = asyncio.create_task(feed.run(stop))
    try:
        await until(lambda: len(dispatcher.sent) >= until_sent, within_s=30)
        await until(lambda: consumer.commits.get(tp(0)) == len(consumer.logs[tp(0)]), within_s=30)
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
    return feed, dispatcher


def logs() -> dict[int, list[bytes]]:
    return {
        0: [to_json(s) for s in HISTORY],
        1: [],
        2: [to_json(storm("x")), to_json(storm("y")), to_json(storm("y", resolved_after_s=1))],
    }


async def test_a_new_partition_starts_at_its_open_signals_and_a_committed_one_resumes() -> None:
    consumer = FakeConsumer(logs(), committed={2: 1})
    feed, dispatcher = await feeding(consumer, from_beginning=False, until_sent=4)
    got = [(s.scope_id, s.state) for s in dispatcher.sent]
    # partition 0: its open set only; partition 2: from its commit, every record
    assert [g for g in got if g[0] in "bc"] == [("b", "open"), ("c", "open")]
    assert [g for g in got if g[0] in "xy"] == [("y", "open"), ("y", "resolved")]
    assert len(got) == 4
    # partition 0 is never committed before its open set is out; the empty one is committed
    # at 0, so a restart resumes both rather than catching up again
    assert all(c.get(tp(0), len(HISTORY)) == len(HISTORY) for c in consumer.commit_calls)
    assert consumer.commits == {tp(0): len(HISTORY), tp(1): 0, tp(2): 3}
    assert feed.catch_up is not None
    assert feed.catch_up.counts == {"open_sent": 2, "resolved": 7, "superseded": 2}

    # after the catch-up, records flow as before: an open and its resolution both go out
    consumer.logs[tp(0)] += [to_json(storm("e")), to_json(storm("e", resolved_after_s=3))]
    _, dispatcher = await feeding(consumer, from_beginning=False, until_sent=2)
    assert [(s.scope_id, s.state) for s in dispatcher.sent] == [("e", "open"), ("e", "resolved")]


async def test_from_beginning_sends_every_record_of_a_new_group() -> None:
    consumer = FakeConsumer(logs(), committed={})
    feed, dispatcher = await feeding(consumer, from_beginning=True, until_sent=len(HISTORY) + 3)
    assert len(dispatcher.sent) == len(HISTORY) + 3
    assert feed.catch_up is None


async def test_a_rebalance_during_the_catch_up_starts_it_again_without_counting_twice() -> None:
    consumer = FakeConsumer(logs(), committed={2: 1})
    consumer.before_poll = lambda n: consumer.rebalance() if n == 3 else None
    feed, dispatcher = await feeding(consumer, from_beginning=False, until_sent=4)
    assert consumer.polls > 3
    assert [(s.scope_id, s.state) for s in dispatcher.sent if s.scope_id in "bc"] == [
        ("b", "open"),
        ("c", "open"),
    ]
    assert feed.catch_up is not None
    assert feed.catch_up.counts == {"open_sent": 2, "resolved": 7, "superseded": 2}
