"""The broker side of the Kafka cases: events published by `gpufrag publish`, a worker run as
`gpufrag worker`, read through its metrics endpoint, and a bare consumer on the same topics."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import orjson
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from connectors.kafka.security import client_kwargs
from streams.app.bench.procs import gpufrag, run_fresh
from streams.app.bench.runner import BenchError
from streams.app.lifecycle.bus import Bus
from streams.distributed import topics

READY_WITHIN_S = 120.0
"""A worker's start (Faust, its tables, the group's first rebalance) took 2-20 s here."""
DONE_WITHIN_S = 600.0
POLL_S = 0.1
QUIET_S = 1.0
"""Nothing released for this long, nothing held, every event released: the worker is done."""
INPUT_TOPICS = tuple(topics.INPUT_BY_KIND.values())
_METRIC = re.compile(r"^(gpufrag_worker_released_total|gpufrag_worker_held_items) (\S+)$", re.M)


def fresh_prefix() -> str:
    """Topics of one run: a new worker must start from nothing, not from a last run's state."""
    return f"bench-{uuid.uuid4().hex[:8]}."


def env_for(bootstrap: str) -> dict[str, str]:
    return {**os.environ, "GPUFRAG_KAFKA__BOOTSTRAP": bootstrap, "PYTHONUNBUFFERED": "1"}


def publish(bootstrap: str, prefix: str, lines: Iterable[bytes], file: Path) -> None:
    """The events onto the input topics through `gpufrag publish --file` (progress reports
    included, as from any publisher)."""
    file.write_bytes(b"\n".join(lines) + b"\n")
    run_fresh(gpufrag("publish", "--file", str(file), "--prefix", prefix), env=env_for(bootstrap))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextmanager
def worker(bootstrap: str, prefix: str, workdir: Path, *, metrics_port: int) -> Iterator[None]:
    """`gpufrag worker` on ``prefix``, ready (its log says so) when this yields; stopped with
    SIGTERM after."""
    name = prefix.strip(".")
    log = workdir / f"worker-{name}.log"
    argv = gpufrag("worker", "--prefix", prefix, "--app-id", f"{prefix}app", "--loglevel", "info")
    argv += ["--datadir", str(workdir / f"data-{name}"), "--metrics-port", str(metrics_port)]
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env_for(bootstrap))
    try:
        deadline = time.monotonic() + READY_WITHIN_S
        while b"Worker ready" not in log.read_bytes():
            if proc.poll() is not None:
                raise BenchError(f"the worker exited with {proc.returncode}: {_tail(log)}")
            if time.monotonic() > deadline:
                raise BenchError(
                    f"the worker was not ready in {READY_WITHIN_S:.0f} s: {_tail(log)}"
                )
            time.sleep(POLL_S)
        yield
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _tail(log: Path) -> str:
    return log.read_text(errors="replace")[-2_000:]


def scrape(port: int) -> tuple[float, float]:
    """(items released, items held) from the worker's metrics endpoint."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        values = dict(_METRIC.findall(r.read().decode()))
    return (
        float(values.get("gpufrag_worker_released_total", 0)),
        float(values.get("gpufrag_worker_held_items", 0)),
    )


def wait_done(port: int, *, events: int) -> tuple[float, float]:
    """Polls the worker's metrics until it has released every event and holds nothing, with no
    item released for ``QUIET_S``. The worker commits every 2 s (streams/distributed/offsets.py),
    too coarse to time a run of seconds by its group's offsets.
    Returns (when the first item was released, when the last was), each within ``POLL_S``."""
    first: float | None = None
    last, last_change = -1.0, time.perf_counter()
    deadline = time.monotonic() + DONE_WITHIN_S
    while True:
        released, held = scrape(port)
        now = time.perf_counter()
        if released != last:
            last, last_change = released, now
            if first is None and released > 0:
                first = now
        elif first is not None and released >= events and not held and now - last_change >= QUIET_S:
            return first, last_change
        if time.monotonic() > deadline:
            raise BenchError(
                f"the worker released {released:.0f} items for {events} events in "
                f"{DONE_WITHIN_S:.0f} s"
            )
        time.sleep(POLL_S)


async def drop_topics(bootstrap: str, prefix: str) -> None:
    """Delete every topic of a run (the inputs, the stages', Faust's changelogs): a bench
    against a shared broker leaves nothing behind."""
    kafka = Bus.resolve(bootstrap, prefix).kafka
    admin = AIOKafkaAdminClient(**client_kwargs(kafka))
    await admin.start()
    try:
        names = [t for t in await admin.list_topics() if t.startswith(prefix)]
        if names:
            await admin.delete_topics(names)
    finally:
        await admin.close()


async def _partitions(consumer: AIOKafkaConsumer, names: Sequence[str]) -> list[TopicPartition]:
    cluster = await consumer._client.fetch_all_metadata()
    return [
        TopicPartition(n, p) for n in names for p in sorted(cluster.partitions_for_topic(n) or ())
    ]


async def bare_read(bootstrap: str, prefix: str) -> tuple[int, float]:
    """A plain aiokafka consumer (no group) reading the input topics to their ends with
    getmany, decoding each value with orjson: (records, seconds)."""
    kafka = Bus.resolve(bootstrap, prefix).kafka
    consumer = AIOKafkaConsumer(enable_auto_commit=False, **client_kwargs(kafka))
    await consumer.start()
    try:
        tps = await _partitions(consumer, [t.full_name(prefix) for t in INPUT_TOPICS])
        ends = await consumer.end_offsets(tps)
        records = sum(ends.values())
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        start = time.perf_counter()
        got = 0
        deadline = time.monotonic() + DONE_WITHIN_S
        while got < records:
            batches = await consumer.getmany(timeout_ms=500, max_records=10_000)
            for batch in batches.values():
                for record in batch:
                    orjson.loads(record.value or b"null")
                got += len(batch)
            if time.monotonic() > deadline:
                raise BenchError(f"the bare consumer read {got} of {records} records")
        return records, time.perf_counter() - start
    finally:
        await consumer.stop()
