"""Slack and the generic webhook against a local HTTP receiver: what they are sent, a receiver
that is down and comes back, one that stays down past give_up_after_s (a dead letter with the
reason), one that refuses the alerts, one that never answers (the stop is not held), and
repeats that are not posted again."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from connectors.alerts import AlertDispatcher, AlertmanagerSink, SlackSink, WebhookSink
from connectors.alerts.dispatcher import STOP_DRAIN_MAX_S
from tests.connectors.alerts.alerting import (
    DeadLetters,
    dispatching,
    metric,
    namespace_storm,
    settings,
    storm,
    until,
)
from tests.connectors.alerts.receiver import Receiver


async def test_the_webhook_gets_each_alert_as_json_firing_then_resolved(receiver: Receiver) -> None:
    async with dispatching([WebhookSink(receiver.url)], settings(), DeadLetters()) as (d, _):
        d.submit(storm())
        await until(lambda: len(receiver.bodies) == 1)
        d.submit(storm(resolved_after_s=90))
        await until(lambda: len(receiver.bodies) == 2)
    first, second = (body["alerts"] for body in receiver.bodies)
    assert receiver.bodies[0]["source"] == "gpufrag"
    assert [a["status"] for a in (*first, *second)] == ["firing", "resolved"]
    assert first[0]["labels"]["node"] == "gpu-h200-07"
    assert first[0]["endsAt"] is None
    assert second[0]["endsAt"] == "2026-03-02T09:31:30Z"
    assert first[0]["annotations"]["runbook_url"].endswith("/oom_storm")


async def test_slack_gets_a_line_per_alert(receiver: Receiver) -> None:
    async with dispatching([SlackSink(receiver.url)], settings(), DeadLetters()) as (d, _):
        d.submit(storm())
        d.submit(namespace_storm("team-a", "research"))
        await until(lambda: sum(b["text"].count("*[") for b in receiver.bodies) == 2)
    text = "\n".join(b["text"] for b in receiver.bodies)
    assert "*[FIRING critical] oom_storm* (test-cluster, node gpu-h200-07)" in text
    assert "(test-cluster, namespace team-a, queue research)" in text
    assert "<https://runbooks.example/gpufrag/oom_storm|runbook>" in text


@pytest.mark.parametrize("make", [SlackSink, WebhookSink], ids=["slack", "webhook"])
async def test_a_receiver_down_then_up_gets_every_alert(receiver: Receiver, make: type) -> None:
    sink = make(receiver.url)
    dead = DeadLetters()
    async with dispatching([sink], settings(), dead) as (d, reg):
        await receiver.stop()
        d.submit(storm("a"))
        d.submit(storm("b"))
        d.submit(storm("a", resolved_after_s=30))  # replaces the unsent open: news, not steps
        failed = {"sink": sink.name, "reason": "unreachable"}
        await until(lambda: metric(reg, "gpufrag_alerts_failed_posts_total", **failed) >= 2)
        assert d.pending == 2
        await receiver.start()
        await d.settled()
    got = [a for b in receiver.bodies for a in b.get("alerts", [])]
    if make is WebhookSink:
        assert sorted((a["labels"]["node"], a["status"]) for a in got) == [
            ("a", "resolved"),
            ("b", "firing"),
        ]
    else:
        text = "\n".join(b["text"] for b in receiver.bodies)
        assert "[RESOLVED] oom_storm* (test-cluster, node a)" in text
        assert "[FIRING critical] oom_storm* (test-cluster, node b)" in text
        assert "node a)\nOOM storm on node a" in text and text.count("node a)") == 1
    assert not dead.kept
    assert metric(reg, "gpufrag_alerts_sent_total", sink=sink.name) == 2


async def test_a_sink_down_past_give_up_leaves_a_dead_letter_and_goes_on(
    receiver: Receiver,
) -> None:
    dead = DeadLetters()
    s = settings(give_up_after_s=0.5)
    async with dispatching([WebhookSink(receiver.url)], s, dead) as (d, reg):
        await receiver.stop()
        d.submit(storm("lost-node"))
        await until(lambda: len(dead.kept) == 1)
        letter = dead.kept[0]
        assert (letter.source, letter.reason) == ("alerts/webhook", "sink_down")
        assert letter.detail.startswith("not accepted in 0.5 s; last error: ClientConnector")
        assert '"node":"lost-node"' in letter.raw and storm("lost-node").fingerprint in letter.raw
        assert d.pending == 0
        reason = {"sink": "webhook", "reason": "sink_down"}
        assert metric(reg, "gpufrag_alerts_dead_lettered_total", **reason) == 1
        await receiver.start()
        d.submit(storm("later-node"))
        await until(lambda: len(receiver.bodies) == 1)
    assert receiver.bodies[0]["alerts"][0]["labels"]["node"] == "later-node"
    assert len(dead.kept) == 1


async def test_alerts_the_receiver_refuses_are_dead_lettered_one_by_one(
    receiver: Receiver,
) -> None:
    dead = DeadLetters()
    receiver.status = 400
    async with dispatching([WebhookSink(receiver.url)], settings(), dead) as (d, _):
        d.submit(storm("x"))
        d.submit(storm("y"))
        await until(lambda: len(dead.kept) == 2)
        assert d.pending == 0
    assert {r.reason for r in dead.kept} == {"rejected"}
    assert all(r.detail == "HTTP 400: invalid_payload" for r in dead.kept)


async def test_an_alert_whose_dead_letter_cannot_be_written_stays_queued(
    receiver: Receiver,
) -> None:
    dead = DeadLetters()
    dead.fail = True
    receiver.status = 400
    async with dispatching([WebhookSink(receiver.url)], settings(), dead) as (d, _):
        d.submit(storm())
        await until(lambda: receiver.hits >= 2)
        assert d.pending == 1
        dead.fail = False
        await until(lambda: len(dead.kept) == 1)
        assert d.pending == 0


async def test_stopping_with_a_sink_down_dead_letters_what_is_queued(receiver: Receiver) -> None:
    dead = DeadLetters()
    async with dispatching([SlackSink(receiver.url)], settings(), dead) as (d, reg):
        await receiver.stop()
        d.submit(storm())
        await until(
            lambda: (
                metric(reg, "gpufrag_alerts_failed_posts_total", sink="slack", reason="unreachable")
                >= 1
            )
        )
    assert [(r.source, r.reason) for r in dead.kept] == [("alerts/slack", "shutdown")]
    assert "last error: ClientConnector" in dead.kept[0].detail


async def test_the_same_open_signal_twice_is_posted_once(receiver: Receiver) -> None:
    s = settings(resend_interval_s=3600)
    sinks = [AlertmanagerSink(receiver.base, s.resend_interval_s), WebhookSink(receiver.url)]
    async with dispatching(sinks, s, DeadLetters()) as (d, reg):
        assert d.submit(storm())
        await d.settled()
        assert not d.submit(storm())  # a restarted worker's copy
        await d.settled()
        assert d.submit(storm(resolved_after_s=5))
        assert not d.submit(storm())  # the open come late: the resolution stands
        await d.settled()
    assert sorted(receiver.paths) == ["/api/v2/alerts"] * 2 + ["/hook"] * 2
    assert metric(reg, "gpufrag_alerts_repeats_total") == 1
    assert d.counts == {"signals": 2, "repeats": 1, "superseded": 1}


async def test_an_old_resolution_after_a_reopening_does_not_end_the_live_alert(
    receiver: Receiver,
) -> None:
    s = settings(resend_interval_s=3600)
    first_end = storm(resolved_after_s=5)
    reopened = storm().model_copy(update={"opened_at": first_end.opened_at + timedelta(hours=1)})
    async with dispatching([WebhookSink(receiver.url)], s, DeadLetters()) as (d, _):
        assert d.submit(storm())
        assert d.submit(first_end)
        assert d.submit(reopened)
        await d.settled()
        assert not d.submit(first_end)  # the first episode's end, redelivered
        await d.settled()
    assert d.counts["superseded"] == 1


async def test_open_alerts_are_sent_to_alertmanager_again_every_interval(
    receiver: Receiver,
) -> None:
    s = settings(resend_interval_s=0.2)
    async with dispatching([AlertmanagerSink(receiver.base, 0.2)], s, DeadLetters()) as (d, _):
        d.submit(storm())
        await until(lambda: len(receiver.bodies) >= 3)
        d.submit(storm(resolved_after_s=1))
        await until(lambda: receiver.bodies[-1][0]["endsAt"] == "2026-03-02T09:30:01Z")
        count = len(receiver.bodies)
        await d.settled()
    # each open post ends 4 intervals after it was made, in the future
    assert all(b[0]["endsAt"] > "2026-03-02T09:31:00Z" for b in receiver.bodies[:3])
    assert len(receiver.bodies) == count  # nothing after the resolution


async def test_a_receiver_that_never_answers_cannot_hold_the_stop(receiver: Receiver) -> None:
    """The longest POST timeout there is, against a receiver that takes the request and never
    answers: the stop still ends within its bounded drain, with the alert dead-lettered."""
    receiver.hang = True
    dead = DeadLetters()
    s = settings(timeout_s=300)
    d = AlertDispatcher([WebhookSink(receiver.url)], settings=s, dead_letter=dead)
    await d.start()
    d.submit(storm())
    await until(lambda: receiver.hits == 1)
    loop = asyncio.get_running_loop()
    began = loop.time()
    await asyncio.wait_for(d.stop(drain_s=s.timeout_s), 120)  # not 300 s
    assert loop.time() - began < STOP_DRAIN_MAX_S + 30  # 30 s: a busy 2-core machine
    assert [(r.source, r.reason) for r in dead.kept] == [("alerts/webhook", "shutdown")]
    assert d.outcome()["dead_lettered"] == {"webhook": 1}


async def test_sent_and_dead_lettered_alerts_are_counted_apart(receiver: Receiver) -> None:
    refusing = Receiver()
    refusing.status = 400
    await refusing.start()
    sinks = [WebhookSink(receiver.url), SlackSink(refusing.url)]
    try:
        async with dispatching(sinks, settings(), DeadLetters()) as (d, _):
            d.submit(storm("a"))
            d.submit(storm("b"))
            await d.settled()
    finally:
        await refusing.stop()
    assert d.outcome() == {
        "signals": 2,
        "repeats": 0,
        "superseded": 0,
        "sent": {"webhook": 2, "slack": 0},
        "dead_lettered": {"webhook": 0, "slack": 2},
    }
    assert d.outcome_line() == (
        "2 alerts to webhook: 2 sent, 0 dead-lettered; to slack: 0 sent, 2 dead-lettered"
    )
