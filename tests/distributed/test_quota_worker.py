"""Quota and queue objects through the real broker: the worker's cluster stage reads them from
their own one-partition topic (and a Job's quota refusal from the tasks stage, which passes
it on with the deltas) and gives the quota signals the embedded runner gives, opened and
resolved at the same times, evidence included."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.distributed.quota_events import events
from tests.distributed.runner_signals import embedded_signals, worker_signals

pytestmark = pytest.mark.kafka
KINDS = {"quota_borrowable", "quota_lender_blocked", "quota_exhausted"}


def test_quota_signals_through_kafka_and_faust_equal_the_embedded_ones(
    kafka_bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    envs = events()
    ours = embedded_signals(envs, KINDS)
    assert sorted((k[1], k[2]) for k in ours) == [
        ("quota_exhausted", "open"),
        ("quota_exhausted", "open"),  # the refused Job's namespace
        ("quota_exhausted", "resolved"),
        ("quota_exhausted", "resolved"),
        ("quota_lender_blocked", "open"),
        ("quota_lender_blocked", "resolved"),
    ]
    theirs, log = worker_signals(
        kafka_bootstrap, topic_prefix, envs, KINDS, expect=len(ours), work=tmp_path
    )
    assert theirs == ours, log
