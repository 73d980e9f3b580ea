"""Quota and queue objects through the real broker: the worker's cluster stage reads them from
their own one-partition topic and gives the quota signals the embedded runner gives, opened
and resolved at the same times, evidence included."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from models import Envelope
from tests.distributed.runner_signals import embedded_signals, worker_signals
from tests.kube_fake.objects import T0
from tests.streams.quota_scenarios import Step, borrower_steps, exhausted_steps

pytestmark = pytest.mark.kafka
KINDS = {"quota_borrowable", "quota_lender_blocked", "quota_exhausted"}


def events() -> list[Envelope]:
    """The borrower and the exhausted namespace, one step every 10 s, in publishing order."""
    steps: list[Step] = [*borrower_steps(), *exhausted_steps()]
    # wrapped again: an event's id is a function of its time too
    return [
        Envelope.wrap(env.payload, event_time=T0 + timedelta(seconds=10 * n), source=env.source)
        for n, step in enumerate(steps)
        for env in step.events
    ]


def test_quota_signals_through_kafka_and_faust_equal_the_embedded_ones(
    kafka_bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    envs = events()
    ours = embedded_signals(envs, KINDS)
    assert sorted((k[1], k[2]) for k in ours) == [
        ("quota_exhausted", "open"),
        ("quota_exhausted", "resolved"),
        ("quota_lender_blocked", "open"),
        ("quota_lender_blocked", "resolved"),
    ]
    theirs, log = worker_signals(
        kafka_bootstrap, topic_prefix, envs, KINDS, expect=len(ours), work=tmp_path
    )
    assert theirs == ours, log
