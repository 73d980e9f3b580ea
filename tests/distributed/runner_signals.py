"""The same events through the embedded runner and through Kafka and a Faust worker: the
signals of the given kinds each gives, as ``signal_key``s (identity, state, times, evidence)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from models import Envelope, GpufragSettings, Signal, from_json, to_json
from streams.distributed import topics
from streams.pipeline import define_pipeline
from tests.distributed.worker_helpers import collect, publish, signal_key, start_worker
from tests.streams.pipeline_feed import feed

SignalKey = tuple[object, ...]


def embedded_signals(envs: list[Envelope], kinds: set[str]) -> set[SignalKey]:
    p = define_pipeline(GpufragSettings()).build()
    out: list[Signal] = []
    for env in envs:
        out += feed(p, env)
    return {signal_key(s.model_dump(mode="json")) for s in out if s.kind in kinds}


def through_worker(
    bootstrap: str,
    prefix: str,
    envs: list[Envelope],
    *,
    topic: str,
    done: Callable[[list[bytes]], bool],
    work: Path,
) -> tuple[list[bytes], str]:
    """Publish ``envs`` to a Faust worker; what it wrote on ``topic`` once ``done`` says so
    (or 240 s passed), and the tail of its log for a failing assertion."""
    file = work / "events.jsonl"
    file.write_bytes(b"".join(to_json(e) + b"\n" for e in envs))
    proc = start_worker(bootstrap, prefix, work / "worker.log")
    try:
        publish(bootstrap, prefix, "--file", str(file))
        raw = asyncio.run(collect(bootstrap, topic, done=done, timeout_s=240, settle_s=3.0))
        return raw, (work / "worker.log").read_text()[-3000:]
    finally:
        proc.terminate()
        proc.wait(60)


def worker_signals(
    bootstrap: str, prefix: str, envs: list[Envelope], kinds: set[str], *, expect: int, work: Path
) -> tuple[set[SignalKey], str]:
    """The worker's signals once ``expect`` of them came (or 240 s passed), and the tail of
    its log for a failing assertion."""

    def relevant(raw: list[bytes]) -> set[SignalKey]:
        signals = [from_json(Signal, r) for r in raw]
        return {signal_key(s.model_dump(mode="json")) for s in signals if s.kind in kinds}

    raw, log = through_worker(
        bootstrap,
        prefix,
        envs,
        topic=topics.SIGNALS.full_name(prefix),
        done=lambda got: len(relevant(got)) >= expect,
        work=work,
    )
    return relevant(raw), log
