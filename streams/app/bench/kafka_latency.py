"""`latency`: wall time from an event's send to the signal it causes, read back from the
signals topic, under a steady offered load through one `gpufrag worker`.

Probes are DCGM samples reporting Xid 79 on a card not probed before: the gpu_health detector
opens a gpu_unhealthy signal for that card at once, so the time measured is the path's (the
publisher, the node stage, the cluster stage's release in event-time order, the signals topic),
not a detector's own wait. The load is the publisher's (progress report every 500 events), so
at a low rate the release waits longer for the next report.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import orjson
from aiokafka import AIOKafkaConsumer

from connectors.kafka.publisher import EventPublisher
from connectors.kafka.security import client_kwargs
from models import Envelope, KafkaSettings
from streams.app.bench import synthetic
from streams.app.bench.kafka_bus import DONE_WITHIN_S, _partitions
from streams.app.bench.runner import BenchError
from streams.distributed import topics

PROBES_PER_S = 100
"""At most: at 10,000 events/s one event in 100; fewer when the cluster has too few cards for a
fresh one per probe in every run (a card already faulted opens no new signal)."""
SIGNAL_KIND = "gpu_unhealthy"


def publisher(kafka: KafkaSettings, prefix: str) -> EventPublisher:
    topic_of = {k.value: t.full_name(prefix) for k, t in topics.INPUT_BY_KIND.items()}
    return EventPublisher(kafka, topic_of=topic_of, source="bench")


async def send_all(kafka: KafkaSettings, prefix: str, events: list[Envelope]) -> None:
    """As fast as the producer takes them (the cluster's first list)."""
    pub = publisher(kafka, prefix)
    await pub.start()
    try:
        for env in events:
            await pub.publish(env)
        await pub.report_progress()
    finally:
        await pub.stop()


def load_with_probes(
    c: synthetic.SynthCluster,
    cards: Iterator[tuple[synthetic.SynthNode, int]],
    *,
    probes: int,
    rate: int,
    seconds: float,
    seed: int,
    first_seq: int,
    start_s: float,
) -> tuple[list[Envelope], dict[int, str]]:
    """``rate * seconds`` live events, ``probes`` of them (evenly spread) replaced by a probe on
    the next card of ``cards``; built (and validated) before the clock starts. Returns the
    events and, by position, the probed card's signal scope id."""
    count = int(rate * seconds)
    raw = list(
        synthetic.live_events(c, seed=seed, count=count, first_seq=first_seq, start_s=start_s)
    )
    every = max(count // max(probes, 1), 1)
    at: dict[int, str] = {}
    for k in range(every - 1, count, every)[:probes]:
        node, index = next(cards)
        payload = synthetic.faulted_sample_payload(node, index)
        raw[k] = {**raw[k], "key": node.name, "payload": payload}
        at[k] = f"{node.name}/{index}"
    return [Envelope.model_validate(e) for e in raw], at


def probes_per_run(c: synthetic.SynthCluster, *, rate: int, seconds: float, runs: int) -> int:
    """PROBES_PER_S over the run, within the cards the runs can fault one each."""
    cards = sum(n.gpu_count for n in c.nodes)
    return max(1, min(int(PROBES_PER_S * seconds), cards // runs, int(rate * seconds)))


def fresh_cards(c: synthetic.SynthCluster) -> Iterator[tuple[synthetic.SynthNode, int]]:
    """Every card once, spread over the nodes (one card of each node, then the next)."""
    most = max(n.gpu_count for n in c.nodes)
    return ((n, i) for i in range(most) for n in c.nodes if i < n.gpu_count)


async def offered(
    kafka: KafkaSettings, prefix: str, events: list[Envelope], probes: dict[int, str], *, rate: int
) -> list[float]:
    """Send ``events`` at ``rate`` a second while reading the signals topic; the latency of
    each probe in seconds."""
    consumer = AIOKafkaConsumer(enable_auto_commit=False, **client_kwargs(kafka))
    await consumer.start()
    try:
        tps = await _partitions(consumer, [topics.SIGNALS.full_name(prefix)])
        consumer.assign(tps)
        await consumer.seek_to_end(*tps)
        for tp in tps:  # resolve the end now, not at the first read
            await consumer.position(tp)
        sent: dict[str, float] = {}
        got: dict[str, float] = {}
        pub = publisher(kafka, prefix)
        await pub.start()
        try:
            reader = asyncio.create_task(_read(consumer, sent, got, expect=len(probes)))
            start = time.perf_counter()
            for k, env in enumerate(events):
                delay = start + k / rate - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                if k in probes:
                    sent[probes[k]] = time.perf_counter()
                await pub.publish(env)
            await pub.report_progress()
            await pub.flush()
            await asyncio.wait_for(reader, DONE_WITHIN_S)
        except TimeoutError:
            raise BenchError(
                f"{len(probes) - len(got)} of {len(probes)} probes had no signal "
                f"in {DONE_WITHIN_S:.0f} s"
            ) from None
        finally:
            await pub.stop()
        return [got[s] - sent[s] for s in sent]
    finally:
        await consumer.stop()


async def _read(
    consumer: AIOKafkaConsumer, sent: dict[str, float], got: dict[str, float], *, expect: int
) -> None:
    while len(got) < expect:
        batches = await consumer.getmany(timeout_ms=50)
        now = time.perf_counter()
        for batch in batches.values():
            for record in batch:
                signal = orjson.loads(record.value or b"{}")
                scope = signal.get("scope_id")
                if signal.get("kind") == SIGNAL_KIND and scope in sent and scope not in got:
                    got[scope] = now


def percentile(values: list[float], pct: float) -> float:
    """Nearest-rank percentile: p99 of 100 probes is the 99th smallest."""
    ranked = sorted(values)
    return ranked[max(0, min(len(ranked) - 1, int(len(ranked) * pct / 100 + 0.999999) - 1))]
