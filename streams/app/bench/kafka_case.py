"""`kafka` and `latency`: the distributed runner through a broker."""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass

import orjson

from models import Envelope
from streams.app.bench import kafka_bus, kafka_latency, synthetic
from streams.app.bench.figures import Figure, Goal, not_run
from streams.app.bench.runner import Context, measure_each
from streams.app.lifecycle.bus import Bus

NO_BROKER = "no broker given (--kafka or GPUFRAG_KAFKA__BOOTSTRAP)"
KAFKA_TARGET = (Goal(20_000, at_most=False),)
LATENCY_TARGET = (Goal(0.5),)


def kafka(ctx: Context) -> list[Figure]:
    if ctx.kafka is None:
        return [not_run("kafka", "events_per_s", "events/s", NO_BROKER, targets=KAFKA_TARGET)]
    broker = ctx.kafka
    s = ctx.scale
    nodes = max(s.ingest_nodes // 20, 10)
    c = synthetic.cluster(seed=ctx.seed, nodes=nodes, running=2 * nodes, pending=nodes // 5)
    lines = [orjson.dumps(e) for e in synthetic.state_events(c)]
    live = max(s.kafka_events - len(lines), 0)
    lines += [
        orjson.dumps(e)
        for e in synthetic.live_events(c, seed=ctx.seed, count=live, first_seq=len(lines))
    ]

    def one_run() -> tuple[float, float]:
        prefix = kafka_bus.fresh_prefix()
        ctx.step("kafka: publishing")
        kafka_bus.publish(broker, prefix, lines, ctx.workdir / f"{prefix}jsonl")
        ctx.step("kafka: the worker reading")
        port = kafka_bus.free_port()
        try:
            with kafka_bus.worker(broker, prefix, ctx.workdir, metrics_port=port):
                first, last = kafka_bus.wait_done(port, events=len(lines))
            _, bare_s = asyncio.run(kafka_bus.bare_read(broker, prefix))
        finally:
            asyncio.run(kafka_bus.drop_topics(broker, prefix))
        return len(lines) / (last - first), len(lines) / bare_s

    # no warm-up run: each run starts a worker of its own, so nothing carries over to warm
    cold = dataclasses.replace(ctx, scale=dataclasses.replace(s, warmup=0))
    rate, bare = measure_each(cold, "kafka", one_run)
    return [
        Figure(
            case="kafka",
            name="events_per_s",
            unit="events/s",
            samples=rate,
            baseline="bare aiokafka consumer, getmany + orjson.loads",
            baseline_samples=bare,
            targets=KAFKA_TARGET,
            params={"nodes": nodes, "events": len(lines)},
        )
    ]


@dataclass(slots=True, kw_only=True)
class _Next:
    """Where the next run's events start: their sequence number and event time (seconds)."""

    seq: int
    s: float


def latency(ctx: Context) -> list[Figure]:
    if ctx.kafka is None:
        return [
            not_run("latency", "p50_s", "s", NO_BROKER),
            not_run("latency", "p99_s", "s", NO_BROKER, targets=LATENCY_TARGET),
        ]
    s = ctx.scale
    nodes = max(s.ingest_nodes // 20, 10)
    c = synthetic.cluster(seed=ctx.seed, nodes=nodes, running=2 * nodes, pending=nodes // 5)
    prefix, port = kafka_bus.fresh_prefix(), kafka_bus.free_port()
    kafka = Bus.resolve(ctx.kafka, prefix).kafka
    state = [Envelope.model_validate(e) for e in synthetic.state_events(c)]
    cards = kafka_latency.fresh_cards(c)
    probes = kafka_latency.probes_per_run(
        c, rate=s.latency_rate_per_s, seconds=s.latency_s, runs=s.warmup + s.runs
    )
    at = _Next(seq=len(state), s=1.0)

    def one_run() -> tuple[float, float]:
        events, probed = kafka_latency.load_with_probes(
            c,
            cards,
            probes=probes,
            rate=s.latency_rate_per_s,
            seconds=s.latency_s,
            seed=ctx.seed + at.seq,
            first_seq=at.seq,
            start_s=at.s,
        )
        at.seq += len(events)
        at.s = (events[-1].event_time - synthetic.START).total_seconds() + 1.0
        ctx.step(f"latency: {s.latency_rate_per_s} events/s for {s.latency_s:g} s")
        waits = asyncio.run(
            kafka_latency.offered(kafka, prefix, events, probed, rate=s.latency_rate_per_s)
        )
        return kafka_latency.percentile(waits, 50), kafka_latency.percentile(waits, 99)

    ctx.step("latency: the worker reading the first list")
    try:
        with kafka_bus.worker(ctx.kafka, prefix, ctx.workdir, metrics_port=port):
            asyncio.run(kafka_latency.send_all(kafka, prefix, state))
            kafka_bus.wait_done(port, events=len(state))
            p50, p99 = measure_each(ctx, "latency", one_run)
    finally:
        asyncio.run(kafka_bus.drop_topics(ctx.kafka, prefix))
    params = {
        "offered_per_s": s.latency_rate_per_s,
        "seconds": s.latency_s,
        "probes_per_run": probes,
        "nodes": nodes,
    }
    return [
        Figure(case="latency", name="p50_s", unit="s", samples=p50, params=params),
        Figure(
            case="latency",
            name="p99_s",
            unit="s",
            samples=p99,
            targets=LATENCY_TARGET,
            params=params,
        ),
    ]
