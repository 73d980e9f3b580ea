"""`gpufrag sink`'s core: bus records to store rows, repeats dropped, bad records kept."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import orjson

from connectors.clickhouse import Store
from models import Action, ActionKind, ActionMode, ActionOutcome, Scope, to_json
from models.actuation import EvictPod
from models.refusal import Refusal
from streams.app.sinks.topic_sink import TopicSink
from tests.connectors.clickhouse.bus_fakes import TP, Consumer, Record
from tests.connectors.clickhouse.factories import signal
from tests.connectors.clickhouse.helpers import SinkMaker


async def test_records_become_rows_once_and_bad_ones_are_kept_with_the_reason(
    make_sink: SinkMaker, store: Store
) -> None:
    sig = signal(1)
    good = to_json(sig)
    dlq = orjson.dumps(
        {"reason": "not json", "topic": "p.gpufrag.pods", "partition": 3, "offset": 7}
    )
    batches = [
        {TP("signals", 0): [Record(0, 1_700_000_000_000, good), Record(1, 0, b"{broken")]},
        {TP("signals", 1): [Record(0, 0, good)], TP("dlq", 0): [Record(5, 0, dlq)]},
    ]
    stop = asyncio.Event()
    consumer = Consumer(batches, stop)
    sink = make_sink()
    await sink.start()
    out = TopicSink(
        consumer=consumer,
        sink=sink,
        run_id="live",
        signals_topic="signals",
        dead_letter_topic="dlq",
    )
    await out.run(stop)
    await sink.flush()
    assert out.counts == {
        "signals": 1,
        "repeats": 1,
        "dead_letters": 1,
        "unreadable": 1,
        "actions": 0,
        "action_requests": 0,
        "stale_proposals": 0,
    }
    assert consumer.commits == 2  # after each batch's rows were stored
    rows = store.query("SELECT fingerprint, run_id FROM signals").rows
    assert [tuple(r) for r in rows] == [(sig.fingerprint, "live")]
    dead = sorted(tuple(r) for r in store.query("SELECT target, reason FROM dead_letter").rows)
    assert dead[0][0] == "topic:dlq" and "p.gpufrag.pods/3@7: not json" in str(dead[0][1])
    assert dead[1][0] == "topic:signals" and "unreadable signal" in str(dead[1][1])


async def test_a_watchers_refusal_on_the_dead_letter_topic_is_stored_as_its_source_says(
    make_sink: SinkMaker, store: Store
) -> None:
    refusal = Refusal(
        source="kube/pods",
        reason="mapping",
        detail="ml/big (resourceVersion 7): requests: cpu_milli: too large",
        raw='{"metadata":{"name":"big"}}',
        at=datetime(2026, 12, 1, tzinfo=UTC),
    )
    stop = asyncio.Event()
    consumer = Consumer([{TP("dlq", 0): [Record(0, 0, to_json(refusal))]}], stop)
    sink = make_sink()
    await sink.start()
    out = TopicSink(
        consumer=consumer, sink=sink, run_id="live", signals_topic="s", dead_letter_topic="dlq"
    )
    await out.run(stop)
    await sink.flush()
    rows = store.query("SELECT target, reason, row FROM dead_letter FINAL").rows
    assert [tuple(map(str, r)) for r in rows] == [
        ("source:kube/pods", f"mapping: {refusal.detail}", refusal.raw)
    ]


async def test_action_records_become_rows_and_requests_are_left_to_the_actuator(
    make_sink: SinkMaker, store: Store
) -> None:
    proposed, executed = _proposed_and_executed()
    request = EvictPod(id="r-1", kind=ActionKind.RECLAIM, reason="x", namespace="ml", name="a")
    batches = [
        {TP("actions", 0): [Record(0, 0, to_json(proposed)), Record(1, 0, to_json(request))]},
        {TP("actions", 0): [Record(2, 0, to_json(executed)), Record(3, 0, b'{"id": 1}')]},
    ]
    out = await _sunk(make_sink, batches)
    assert (out.counts["actions"], out.counts["action_requests"]) == (2, 1)
    assert out.counts["unreadable"] == 1
    rows = store.query("SELECT id, outcome, mode FROM actions FINAL").rows
    assert [tuple(r) for r in rows] == [("r-1", "executed", "enforce")]  # the outcome replaces
    (dead,) = store.query("SELECT reason FROM dead_letter").rows
    assert "unreadable action" in str(dead[0])


async def test_a_proposal_sent_again_after_its_outcome_does_not_replace_it(
    make_sink: SinkMaker, store: Store
) -> None:
    """The long chaos soak: a worker killed after planning sent its proposals again after the
    actuator's outcomes, and two executed evictions were stored as proposed."""
    proposed, executed = _proposed_and_executed()
    other = proposed.model_copy(update={"id": "r-2", "target": "ml/b"})
    batches = [
        {TP("actions", 0): [Record(0, 0, to_json(proposed)), Record(1, 0, to_json(executed))]},
        # the restarted worker's copies: one after its outcome, one of an action not yet done
        {TP("actions", 0): [Record(2, 0, to_json(proposed)), Record(3, 0, to_json(other))]},
    ]
    out = await _sunk(make_sink, batches)
    assert (out.counts["actions"], out.counts["stale_proposals"]) == (3, 1)
    rows = store.query("SELECT id, outcome FROM actions FINAL ORDER BY id").rows
    assert [tuple(r) for r in rows] == [("r-1", "executed"), ("r-2", "proposed")]


def _proposed_and_executed() -> tuple[Action, Action]:
    at = datetime(2026, 3, 1, tzinfo=UTC)
    common = {"kind": ActionKind.RECLAIM, "reason": "room for ml/job", "target_scope": Scope.POD}
    proposed = Action(
        id="r-1", outcome=ActionOutcome.PROPOSED, target="ml/a", created_at=at, **common
    )
    executed = proposed.model_copy(
        update={"outcome": ActionOutcome.EXECUTED, "mode": ActionMode.ENFORCE}
    )
    return proposed, executed


async def _sunk(make_sink: SinkMaker, batches: list[dict[TP, list[Record]]]) -> TopicSink:
    """The batches of the actions topic through a sink into the store."""
    stop = asyncio.Event()
    sink = make_sink()
    await sink.start()
    out = TopicSink(
        consumer=Consumer(batches, stop),
        sink=sink,
        run_id="live",
        signals_topic="signals",
        dead_letter_topic="dlq",
        actions_topic="actions",
    )
    await out.run(stop)
    await sink.flush()
    return out
