"""A worker that has read the whole bundled trace commits it, and a worker started after it
stopped reads almost none of it again: the group resumes from its committed offsets and the
stages from their saved marks and progress, against a real broker.

Before offsets were committed, every restart read each input partition again from its start:
81,277 messages handed to the stages for this trace, all of them again.
"""

from __future__ import annotations

import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from streams.distributed.app import READS
from tests.distributed.worker_helpers import publish, start_worker, wait_caught_up
from tests.ports import free_port

pytestmark = pytest.mark.kafka

TRACE_EVENTS = 25_330


def _figures(port: int) -> tuple[dict[str, float], dict[tuple[str, str], float]]:
    """The worker's counters, and its lag per input partition."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    figures: dict[str, float] = {}
    lag: dict[tuple[str, str], float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == "gpufrag_worker_consumer_lag_messages":
                lag[(s.labels["topic"], s.labels["partition"])] = s.value
            else:
                figures[s.name] = s.value
    return figures, lag


def _until_resumed(port: int, partitions: int, *, timeout_s: float = 240) -> dict[str, float]:
    """Until the worker holds every input partition, each with nothing past its commit: all it
    will ever read of what is on the topics now, it has read and finished."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            figures, lag = _figures(port)
        except OSError:  # not serving yet
            figures, lag = {}, {}
        if len(lag) == partitions and not any(lag.values()):
            return figures
        assert time.monotonic() < deadline, f"not resumed: {len(lag)} partitions, lag {lag}"
        time.sleep(1.0)


def test_a_restart_after_the_whole_trace_reads_at_most_one_percent_again(
    kafka_bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    assert f"published {TRACE_EVENTS} events" in publish(kafka_bootstrap, topic_prefix)
    specs = {s.name: s for stage_inputs in READS.values() for s in stage_inputs}
    inputs = sorted(s.full_name(topic_prefix) for s in specs.values())
    partitions = sum(s.partitions for s in specs.values())

    first_port, second_port = free_port(), free_port()
    first = start_worker(
        kafka_bootstrap, topic_prefix, tmp_path / "first.log", metrics_port=first_port
    )
    try:
        # the broker says the group committed every input record (the stages' outputs
        # included), twice in a row with nothing new between
        wait_caught_up(kafka_bootstrap, f"{topic_prefix}app", inputs, timeout_s=600)
        read_first = _until_resumed(first_port, partitions)["gpufrag_worker_read_total"]
    finally:
        # stopped, not killed: what it had committed is on the broker already (above), and
        # leaving the group at once spares its successor the session timeout
        first.terminate()
        first.wait(60)
    assert read_first > TRACE_EVENTS  # the published events, and the stages' own messages

    second = start_worker(
        kafka_bootstrap, topic_prefix, tmp_path / "second.log", metrics_port=second_port
    )
    try:
        figures = _until_resumed(second_port, partitions)
    finally:
        second.terminate()
        second.wait(60)
    read_again = figures["gpufrag_worker_read_total"]
    assert read_again <= 0.01 * read_first, (read_again, read_first)
    assert figures["gpufrag_worker_held_items"] == 0
