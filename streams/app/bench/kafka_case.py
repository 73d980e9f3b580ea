"""`kafka` and `latency`: the distributed runner through a broker."""

from __future__ import annotations

from streams.app.bench.figures import Figure, Target, not_run
from streams.app.bench.runner import Context

NO_BROKER = "no broker given (--kafka or GPUFRAG_KAFKA__BOOTSTRAP_SERVERS)"


def kafka(ctx: Context) -> list[Figure]:
    target = (Target(20_000, at_most=False),)
    return [not_run("kafka", "events_per_s", "events/s", NO_BROKER, targets=target)]


def latency(ctx: Context) -> list[Figure]:
    target = (Target(0.5),)
    return [
        not_run("latency", "p50_s", "s", NO_BROKER),
        not_run("latency", "p99_s", "s", NO_BROKER, targets=target),
    ]
