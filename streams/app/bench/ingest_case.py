"""`ingest`: events a second through decoding, validation, the join and the detectors, in one
process (the embedded runner), from a live load on a generated cluster."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Iterator, Sequence

import orjson

from models import Envelope, from_json
from streams.app.bench import synthetic
from streams.app.bench.figures import Figure, Goal
from streams.app.bench.runner import BenchError, Context, measure
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


def _decoded(lines: Sequence[bytes]) -> Iterator[Envelope]:
    """The edge: bus bytes into validated envelopes, as the runner takes them."""
    for line in lines:
        yield from_json(Envelope, line)


def run_through(pipeline: Pipeline, lines: Sequence[bytes]) -> float:
    """Seconds to take ``lines`` through the runner; a dead-lettered event is a BenchError (a
    refused event is cheaper than a processed one, so the figure would flatter)."""
    out = _Discard()
    runner = EmbeddedRunner(source=_decoded(lines), output=out, pipeline=pipeline)
    start = time.perf_counter()
    asyncio.run(runner.run())
    seconds = time.perf_counter() - start
    if out.failures:
        first = out.failures[0]
        raise BenchError(
            f"ingest: {len(out.failures)} events failed at {first.stage}: {first.reason}"
        )
    return seconds


def ingest(ctx: Context) -> list[Figure]:
    s = ctx.scale
    # the cluster: 2 running pods a node, 2,000 pending at 10,000 nodes
    c = synthetic.cluster(
        seed=ctx.seed, nodes=s.ingest_nodes, running=2 * s.ingest_nodes, pending=s.ingest_nodes // 5
    )
    pipeline = define_pipeline(load_settings()).build()
    first = [orjson.dumps(e) for e in synthetic.state_events(c)]
    ctx.step(f"ingest: the first list ({len(first)} events)")
    run_through(pipeline, first)
    # the first list warmed the pipeline (30,277 events at 10,000 nodes): no warm-up slice
    slices = s.runs
    live = [
        orjson.dumps(e)
        for e in synthetic.live_events(
            c, seed=ctx.seed, count=slices * s.ingest_events, first_seq=len(first)
        )
    ]
    # each run takes the next slice of the live load, so the pipeline's state moves on as live
    parts = iter([live[i * s.ingest_events : (i + 1) * s.ingest_events] for i in range(slices)])
    warm = dataclasses.replace(ctx, scale=dataclasses.replace(s, warmup=0))
    rate = measure(warm, "ingest", lambda: s.ingest_events / run_through(pipeline, next(parts)))
    sample = live[: s.ingest_events]

    def decode_only() -> float:
        start = time.perf_counter()
        for line in sample:
            orjson.loads(line)
        return s.ingest_events / (time.perf_counter() - start)

    decoded = measure(ctx, "ingest: orjson.loads baseline", decode_only)
    return [
        Figure(
            case="ingest",
            name="events_per_s",
            unit="events/s",
            samples=rate,
            baseline="orjson.loads of the same bytes",
            baseline_samples=decoded,
            targets=(Goal(50_000, at_most=False),),
            params={
                "nodes": len(c.nodes),
                "gpus": c.gpus,
                "pods": len(c.pods),
                "events_per_run": s.ingest_events,
                "first_list_events": len(first),
            },
        ),
    ]
