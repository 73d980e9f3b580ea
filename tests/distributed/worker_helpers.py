"""Running `gpufrag worker` and `gpufrag sink` against a real broker, and reading topics back."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

import orjson
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from connectors.trace.bundled import bundled_pods_path
from streams.distributed import topics
from tests.app.pipeline_helpers import store_at
from tests.paths import REPO_ROOT

KAFKA_SH = REPO_ROOT / "deploy" / "local" / "kafka.sh"


def kafka_env(bootstrap: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a `gpufrag` command that talks to the broker at ``bootstrap``, with
    ``extra`` variables (the Kafka security settings)."""
    env = {**os.environ, "GPUFRAG_KAFKA__BOOTSTRAP": bootstrap, "PYTHONUNBUFFERED": "1"}
    return {**env, **(extra or {})}


def start_worker(
    bootstrap: str,
    prefix: str,
    log: Path,
    *,
    metrics_port: int | None = None,
    extra_env: dict[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    fh = log.open("wb")
    extra = [] if metrics_port is None else ["--metrics-port", str(metrics_port)]
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streams.app",
            "worker",
            "--prefix",
            prefix,
            "--app-id",
            f"{prefix}app",
            "--typical-from",
            str(bundled_pods_path()),
            "--loglevel",
            "info",
            *extra,
        ],
        stdout=fh,
        stderr=subprocess.STDOUT,
        env=kafka_env(bootstrap, extra_env),
    )
    deadline = time.monotonic() + 120
    while b"Worker ready" not in log.read_bytes():
        assert proc.poll() is None, log.read_text()[-3000:]
        assert time.monotonic() < deadline, "worker not ready in 120 s"
        time.sleep(0.5)
    return proc


def publish(bootstrap: str, prefix: str, *args: str) -> str:
    """``gpufrag publish --prefix PREFIX ARGS`` to the end (the bundled trace unless ARGS name
    a file); its output, once it succeeded."""
    out = subprocess.run(
        [sys.executable, "-m", "streams.app", "publish", "--prefix", prefix, *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=kafka_env(bootstrap),
        check=False,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def start_sink(
    bootstrap: str,
    prefix: str,
    dsn: str,
    log: Path,
    *,
    group: str = "gpufrag-sink",
    extra_env: dict[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            *(sys.executable, "-m", "streams.app", "sink", "--prefix", prefix),
            *("--store", dsn, "--group", group),
        ],
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        env=kafka_env(bootstrap, extra_env),
    )


def signal_key(d: dict[str, object]) -> tuple[object, ...]:
    """What must match between runners: identity, state, times and evidence."""
    return (
        d["fingerprint"],
        d["kind"],
        d["state"],
        d["opened_at"],
        d["resolved_at"],
        orjson.dumps(d["evidence"], option=orjson.OPT_SORT_KEYS),
    )


async def collect(
    bootstrap: str,
    topic: str,
    *,
    until: int | None = None,
    timeout_s: float,
    done: Callable[[list[bytes]], bool] | None = None,
    settle_s: float = 0.0,
) -> list[bytes]:
    """Read from the start until ``until`` records (or ``done``), then ``settle_s`` more."""
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False
    )
    await consumer.start()
    got: list[bytes] = []
    try:
        deadline = time.monotonic() + timeout_s

        def finished() -> bool:
            return (until is not None and len(got) >= until) or (done is not None and done(got))

        while not finished() and time.monotonic() < deadline:
            batch = await consumer.getmany(timeout_ms=1000)
            for records in batch.values():
                got += [r.value or b"" for r in records]
        settle_until = time.monotonic() + settle_s
        while time.monotonic() < settle_until:
            batch = await consumer.getmany(timeout_ms=500)
            for records in batch.values():
                got += [r.value or b"" for r in records]
    finally:
        await consumer.stop()
    return got


async def group_lag(
    bootstrap: str, group: str, topic_names: list[str]
) -> tuple[int, dict[str, int]]:
    """Records of ``topic_names`` the group has not committed yet (a partition it never
    committed on counts from its first offset), and the end offsets it was measured against."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap)
    await admin.start()
    await consumer.start()
    try:
        described = await admin.describe_topics(topic_names)
        tps = [
            TopicPartition(d["topic"], p["partition"])
            for d in described
            for p in sorted(d["partitions"], key=lambda p: p["partition"])
        ]
        missing = sorted(set(topic_names) - {tp.topic for tp in tps})
        assert not missing, f"no partitions known for {missing}"
        committed = await admin.list_consumer_group_offsets(group)
        starts = await consumer.beginning_offsets(tps)
        ends = await consumer.end_offsets(tps)
        done = {tp: committed[tp].offset if tp in committed else starts[tp] for tp in tps}
        lag = sum(ends[tp] - done[tp] for tp in tps)
        return lag, {f"{tp.topic}/{tp.partition}": ends[tp] for tp in tps}
    finally:
        await admin.close()
        await consumer.stop()


def wait_caught_up(
    bootstrap: str, group: str, topic_names: list[str], *, timeout_s: float = 240
) -> None:
    """Until ``group`` has committed every record of ``topic_names``, twice in a row with no
    new record in between (what it read may still be making more)."""
    deadline = time.monotonic() + timeout_s
    before: dict[str, int] | None = None
    while True:
        got: tuple[int, dict[str, int]] = asyncio.run(group_lag(bootstrap, group, topic_names))
        if got[0] == 0:
            if got[1] == before:
                return
            before = got[1]
        else:
            before = None
        assert time.monotonic() < deadline, f"group {group} still behind: {got}"
        time.sleep(2.0)


async def input_records(bootstrap: str, prefix: str) -> int:
    """Records on the input topics (events and progress reports): how far a publisher got."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap)
    await consumer.start()
    try:
        tps = [
            TopicPartition(t.full_name(prefix), p)
            for t in topics.INPUT_BY_KIND.values()
            for p in range(t.partitions)
        ]
        return sum((await consumer.end_offsets(tps)).values())
    finally:
        await consumer.stop()


@contextmanager
def held_mid_stream(
    publisher: subprocess.Popen[bytes],
    bootstrap: str,
    prefix: str,
    *,
    after_records: int,
    signals: int,
    timeout_s: float = 300,
) -> Iterator[list[bytes]]:
    """Freeze ``publisher`` (SIGSTOP) once the input topics hold ``after_records``, until the
    workers have sent ``signals`` signals; yield them, and let it go on (SIGCONT) on leaving.

    What the caller does inside then happens mid-stream on either side whatever the machine's
    load: a publisher paced by the clock alone (2,224 events at 50/s) once ended before a worker
    on a machine at load 14-18 had sent its third signal. The publisher's progress reports go by
    record count, so a frozen publisher leaves the workers able to release what it sent."""
    deadline = time.monotonic() + timeout_s
    while asyncio.run(input_records(bootstrap, prefix)) < after_records:
        assert publisher.poll() is None, "the publisher ended before it was held"
        assert time.monotonic() < deadline, f"fewer than {after_records} input records"
        time.sleep(0.1)
    publisher.send_signal(signal.SIGSTOP)
    try:
        seen = asyncio.run(
            collect(
                bootstrap,
                topics.SIGNALS.full_name(prefix),
                until=signals,
                timeout_s=max(deadline - time.monotonic(), 1.0),
            )
        )
        assert len(seen) >= signals, f"{len(seen)} signals from {after_records} input records"
        yield seen
    finally:
        publisher.send_signal(signal.SIGCONT)


def last_event_time(dsn: str) -> datetime:
    """The latest event time a stored run of the input holds."""
    with store_at(dsn) as st:
        value = st.query("SELECT max(event_time) FROM events").rows[0][0]
    assert isinstance(value, datetime)
    return value


def until_reported(bootstrap: str, prefix: str, last: datetime, *, timeout_s: float = 600) -> None:
    """Until the cluster view has reported the instant ``last`` (the input's last)."""
    final = last.strftime("%Y-%m-%dT%H:%M:%S")

    def done(raw: list[bytes]) -> bool:
        return any(str(orjson.loads(r)["at"]).startswith(final) for r in raw[-20:])

    got = asyncio.run(
        collect(bootstrap, topics.CLUSTER_REPORTS.full_name(prefix), done=done, timeout_s=timeout_s)
    )
    assert done(got), f"no report for {final} in {timeout_s} s"


@contextmanager
def broker_of_own(
    run_dir: Path, *, keep_logs: Path | None = None
) -> Iterator[tuple[str, dict[str, str]]]:
    """A broker of the caller's own (``deploy/local/kafka.sh`` in ``run_dir``), to stop and
    start without disturbing the other tests' broker: its address and the environment that
    names it to the script. ``keep_logs``: where its logs are copied before it is removed
    (what it did through a run's restarts is the first thing a failed soak asks)."""
    env = {**os.environ, "GPUFRAG_KAFKA_DIR": str(run_dir)}
    out = subprocess.run(
        ["bash", str(KAFKA_SH), "start"], env=env, capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stderr
    try:
        yield out.stdout.strip().splitlines()[-1], env
    finally:
        if keep_logs is not None and (run_dir / "logs").is_dir():
            shutil.copytree(run_dir / "logs", keep_logs, dirs_exist_ok=True)
        subprocess.run(["bash", str(KAFKA_SH), "stop"], env=env, timeout=120, check=False)


def stop_processes(*procs: subprocess.Popen[bytes]) -> None:
    """SIGTERM to each still running, then SIGKILL to any not gone within a minute."""
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(60)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(30)
