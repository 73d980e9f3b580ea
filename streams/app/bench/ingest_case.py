"""`ingest`: events a second through decoding, validation, the join and the detectors, in one
process (the embedded runner), from a live load on a generated cluster.

The cluster's first list and its live load go through one runner as one stream, the way a
watcher's list and watch reach a running pipeline. Each timed run is the next slice of the live
load, timed from the moment the analysis finished the slice before it to the moment it finished
this one. An earlier version ran each slice through a fresh runner: the end of each slice was the
end of an input, so every 5,000-event run also paid the end-of-input evaluation of 2,000 pending
pods against 10,000 nodes (most of its time at the large scale) that a live stream does every
``evaluate_every_s`` (30 s) of event time, that is once per 240,000 events of this load. That
evaluation is timed by itself instead (``end_evaluation_s``), once, at the end of the stream.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import pairwise

import orjson

from models import Envelope, from_json
from streams.app.bench import synthetic
from streams.app.bench.figures import Figure, Goal, Samples
from streams.app.bench.runner import BenchError, Context, measure
from streams.app.lifecycle.collector import CollectorPolicy
from streams.app.lifecycle.settings_load import load_settings
from streams.pipeline import Pipeline, define_pipeline
from streams.runner.embedded import EmbeddedRunner, Emission, Failure


class _Discard:
    """The runner's output, keeping only what failed: the figure is the pipeline's alone."""

    def __init__(self) -> None:
        self.failures: list[Failure] = []

    async def emit(self, item: Emission) -> None:
        pass

    async def dead_letter(self, failure: Failure) -> None:
        self.failures.append(failure)


def _decoded(lines: Iterator[bytes]) -> Iterator[Envelope]:
    """The edge: bus bytes into validated envelopes, as the runner takes them."""
    for line in lines:
        yield from_json(Envelope, line)


@dataclass(frozen=True, slots=True)
class StreamTimes:
    parts_s: tuple[float, ...]
    """Seconds each part took through the analysis (the first from the runner's start)."""
    end_s: float
    """Seconds from the last event analysed to the runner's return: the end of input's
    evaluation of what is outstanding."""


def run_stream(
    pipeline: Pipeline, parts: Sequence[Sequence[bytes]], *, step: list[str], ctx: Context
) -> StreamTimes:
    """``parts`` through one runner, in order; a dead-lettered event is a BenchError (a
    refused event is cheaper than a processed one, so the figure would flatter)."""
    ends: list[int] = []
    total = 0
    for part in parts:
        total += len(part)
        ends.append(total)
    marks: list[float] = []
    pending = iter(zip(ends, step[1:], strict=False))
    nxt = next(pending, None)

    def on_progress(count: int, _at: datetime) -> None:
        nonlocal nxt
        if count in ends:
            marks.append(time.perf_counter())
            if nxt is not None and count == nxt[0]:
                ctx.step(nxt[1])
                nxt = next(pending, None)

    out = _Discard()
    lines = (line for part in parts for line in part)
    runner = EmbeddedRunner(
        source=_decoded(lines), output=out, pipeline=pipeline, on_progress=on_progress
    )
    # the collector as `gpufrag watch --bus embedded` sets it up, for this stream only: the
    # cases after this one run in this process too
    policy = CollectorPolicy()
    policy.install()
    ctx.step(step[0])
    try:
        start = time.perf_counter()
        asyncio.run(runner.run())
        end = time.perf_counter()
    finally:
        policy.uninstall()
    if out.failures:
        first = out.failures[0]
        raise BenchError(
            f"ingest: {len(out.failures)} events failed at {first.stage}: {first.reason}"
        )
    if len(marks) != len(parts):
        raise BenchError(f"ingest: {len(marks)} of {len(parts)} parts were analysed")
    bounds = [start, *marks]
    return StreamTimes(
        parts_s=tuple(b - a for a, b in pairwise(bounds)),
        end_s=end - marks[-1],
    )


def ingest(ctx: Context) -> list[Figure]:
    s = ctx.scale
    # the cluster: 2 running pods a node, 2,000 pending at 10,000 nodes
    c = synthetic.cluster(
        seed=ctx.seed, nodes=s.ingest_nodes, running=2 * s.ingest_nodes, pending=s.ingest_nodes // 5
    )
    pipeline = define_pipeline(load_settings()).build()
    first = [orjson.dumps(e) for e in synthetic.state_events(c)]
    slices = s.warmup + s.runs
    live = [
        orjson.dumps(e)
        for e in synthetic.live_events(
            c, seed=ctx.seed, count=slices * s.ingest_events, first_seq=len(first)
        )
    ]
    n = s.ingest_events
    parts = [first, *(live[i * n : (i + 1) * n] for i in range(slices))]
    # the warm-up slices take the first evaluation of the pending pods (due at the first
    # instant after the list) and warm the caches; the timed slices follow them
    step = [f"ingest: the first list ({len(first)} events)"]
    step += [f"ingest: warm-up {i + 1}/{s.warmup}" for i in range(s.warmup)]
    step += [f"ingest: run {i + 1}/{s.runs}" for i in range(s.runs)]
    times = run_stream(pipeline, parts, step=step, ctx=ctx)
    timed = times.parts_s[1 + s.warmup :]
    rate = Samples(tuple(n / t for t in timed))
    sample = live[:n]

    def decode_only() -> float:
        start = time.perf_counter()
        for line in sample:
            orjson.loads(line)
        return n / (time.perf_counter() - start)

    decoded = measure(ctx, "ingest: orjson.loads baseline", decode_only)
    params = {
        "nodes": len(c.nodes),
        "gpus": c.gpus,
        "pods": len(c.pods),
        "pending": len(c.pending),
        "events_per_run": n,
        "first_list_events": len(first),
        "first_list_s": round(times.parts_s[0], 3),
    }
    return [
        Figure(
            case="ingest",
            name="events_per_s",
            unit="events/s",
            samples=rate,
            baseline="orjson.loads of the same bytes",
            baseline_samples=decoded,
            targets=(Goal(50_000, at_most=False),),
            params=params,
        ),
        Figure(
            case="ingest",
            name="end_evaluation_s",
            unit="s",
            samples=Samples((times.end_s,)),
            note="the end of input's evaluation of every pending pod against every node, "
            "which a live stream does once per evaluate_every_s of event time",
            params={"nodes": len(c.nodes), "pending": len(c.pending)},
        ),
    ]
