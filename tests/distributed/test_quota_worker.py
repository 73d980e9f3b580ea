"""Quota and queue objects through the real broker: the worker's cluster stage reads them from
their own one-partition topic and gives the quota signals the embedded runner gives, opened
and resolved at the same times, evidence included."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from models import Envelope, GpufragSettings, Signal, from_json, to_json
from streams.distributed import topics
from streams.pipeline import define_pipeline
from tests.distributed.worker_helpers import collect, kafka_env, signal_key, start_worker
from tests.kube_fake.objects import T0
from tests.streams.pipeline_feed import feed
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


def embedded(envs: list[Envelope]) -> set[tuple[object, ...]]:
    p = define_pipeline(GpufragSettings()).build()
    out: list[Signal] = []
    for env in envs:
        out += feed(p, env)
    return {signal_key(s.model_dump(mode="json")) for s in out if s.kind.value in KINDS}


def test_quota_signals_through_kafka_and_faust_equal_the_embedded_ones(
    kafka_bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    envs = events()
    ours = embedded(envs)
    assert sorted((k[1], k[2]) for k in ours) == [
        ("quota_exhausted", "open"),
        ("quota_exhausted", "resolved"),
        ("quota_lender_blocked", "open"),
        ("quota_lender_blocked", "resolved"),
    ]
    file = tmp_path / "queues.jsonl"
    file.write_bytes(b"".join(to_json(e) + b"\n" for e in envs))
    proc = start_worker(kafka_bootstrap, topic_prefix, tmp_path / "worker.log")
    try:
        out = subprocess.run(
            [
                *(sys.executable, "-m", "streams.app", "publish"),
                *("--file", str(file), "--prefix", topic_prefix),
            ],
            capture_output=True,
            text=True,
            timeout=300,
            env=kafka_env(kafka_bootstrap),
            check=False,
        )
        assert out.returncode == 0, out.stderr

        def relevant(raw: list[bytes]) -> set[tuple[object, ...]]:
            signals = [from_json(Signal, r) for r in raw]
            return {signal_key(s.model_dump(mode="json")) for s in signals if s.kind in KINDS}

        raw = asyncio.run(
            collect(
                kafka_bootstrap,
                topics.SIGNALS.full_name(topic_prefix),
                done=lambda got: len(relevant(got)) >= len(ours),
                timeout_s=240,
                settle_s=3.0,
            )
        )
        assert relevant(raw) == ours, (tmp_path / "worker.log").read_text()[-3000:]
    finally:
        proc.terminate()
        proc.wait(60)
