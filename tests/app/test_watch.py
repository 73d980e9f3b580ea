"""`gpufrag watch` as a user runs it: a subprocess against a real dcgm-exporter stand-in (HTTP),
the fake Kubernetes API server (HTTP, through a kubeconfig), a dead exporter URL, and either
the real Kafka broker or a chDB history store; plus the embedded runner on an async source."""

from __future__ import annotations

import asyncio
import json
import os
import socket
from collections import defaultdict
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import orjson
import pytest
from aiokafka import AIOKafkaConsumer

from models import (
    Envelope,
    GpufragSettings,
    GpuSample,
    GpuSampleEvent,
    NodeEvent,
    PodEvent,
    from_json,
)
from models.progress import SourceProgress
from streams.distributed import topics
from streams.pipeline import define_pipeline
from streams.runner.embedded import EmbeddedRunner, Emission, Failure
from streams.runner.live_stream import LiveStream
from tests.app.pipeline_helpers import dsn_for, store_at
from tests.app.watch_helpers import kubeconfig_for, run_watch, sample_value, start_watch
from tests.connectors.dcgm.exporter_server import FakeExporter
from tests.kube_fake import FakeApiServer, FakeCluster
from tests.kube_fake.objects import T0, container, node, pod
from tests.ports import free_port

PAGE = Path(__file__).parents[1] / "connectors" / "dcgm" / "fixtures" / "plain_h200.txt"
NODE = "gpu-h200-07"  # the fixture page's Hostname label
HOST = socket.gethostname()
DCGM, KUBE = f"dcgm@{HOST}", f"kube@{HOST}"


@dataclass(frozen=True, slots=True)
class Endpoints:
    exporter: str
    dead: str
    kubeconfig: Path


@asynccontextmanager
async def live_endpoints(tmp_path: Path) -> AsyncIterator[Endpoints]:
    """An exporter serving the H200 fixture page, an exporter URL nothing listens on, and the
    fake API server holding that node and one pod on it."""
    exporter = FakeExporter(PAGE.read_bytes())
    cluster = FakeCluster()
    cluster.apply(node(NODE, gpus=2, product="NVIDIA-H200"))
    cluster.apply(pod("train-0", gpus=1, node=NODE, phase="Running"))
    # one pod no cluster can have (10^17 cores): refused, kept as a dead letter, nothing else
    absurd = {"cpu": "100000000000000000", "memory": "1Gi"}
    cluster.apply(pod("absurd", containers=[container(requests=absurd, limits=dict(absurd))]))
    server = FakeApiServer(cluster)
    kubeconfig = kubeconfig_for(tmp_path / "kubeconfig", server)
    await exporter.start()
    await server.start()
    try:
        yield Endpoints(exporter.url, f"http://127.0.0.1:{free_port()}/metrics", kubeconfig)
    finally:
        await server.stop()
        await exporter.stop()
        await cluster.close()


def watch_env(ep: Endpoints) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUFRAG_")}
    env.update(
        GPUFRAG_DCGM__INTERVAL_S="0.5",
        GPUFRAG_DCGM__BACKOFF_INITIAL_S="0.1",
        GPUFRAG_DCGM__BACKOFF_MAX_S="0.3",
        GPUFRAG_KUBE__KUBECONFIG=str(ep.kubeconfig),
        GPUFRAG_KUBE__RESOURCES='["pods", "nodes"]',
        COLUMNS="200",
    )
    return env


def sources_ready(ep: Endpoints, *, stage: str) -> Callable[[str], bool]:
    """Metrics show every source at work, the dead exporter's failures included, and the
    live ``stage`` reporting progress."""

    def ready(page: str) -> bool:
        return (
            (sample_value(page, "gpufrag_dcgm_samples_emitted_total", endpoint=ep.exporter) or 0)
            >= 4
            and (
                sample_value(
                    page, "gpufrag_dcgm_scrape_errors_total", endpoint=ep.dead, reason="connect"
                )
                or 0
            )
            >= 2
            and (sample_value(page, "gpufrag_kube_events_total", resource="nodes") or 0) >= 1
            and (sample_value(page, "gpufrag_watch_progress_timestamp_seconds", stage=stage) or 0)
            > 0
        )

    return ready


def sent_counts(stdout: str) -> dict[str, tuple[int, int]]:
    """``<source>: N events sent (L late), P progress reports`` per source."""
    out = {}
    for line in stdout.splitlines():
        if " events sent " in line:
            name, rest = line.split(": ", 1)
            words = rest.split()
            out[name] = (int(words[0]), int(words[-3]))
    return out


async def consume(bootstrap: str, names: list[str], expected: int) -> list[tuple[str, int, bytes]]:
    consumer = AIOKafkaConsumer(
        *names, bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False
    )
    await consumer.start()
    got: list[tuple[str, int, bytes]] = []
    try:
        async with asyncio.timeout(30):
            while len(got) < expected:
                batch = await consumer.getmany(timeout_ms=500)
                for tp, records in batch.items():
                    got += [(tp.topic, tp.partition, r.value or b"") for r in records]
    finally:
        await consumer.stop()
    return got


@pytest.mark.kafka
async def test_watch_publishes_live_sources_with_progress(
    kafka_bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    async with live_endpoints(tmp_path) as ep:
        ready = sources_ready(ep, stage=DCGM)
        done = await run_watch(
            "--dcgm",
            ep.exporter,
            "--dcgm",
            ep.dead,
            "--bus",
            "kafka",
            "--bootstrap",
            kafka_bootstrap,
            "--prefix",
            topic_prefix,
            "--duration-s",
            "4",
            env=watch_env(ep),
            metrics_port=free_port(),
            ready=ready,
        )
    assert done.returncode == 0, done.stderr
    assert ready(done.metrics), done.metrics  # the dead exporter did not stop the watch
    assert sample_value(done.metrics, "gpufrag_watch_events_total", source=DCGM)
    assert sample_value(done.metrics, "gpufrag_watch_late_events_total", source=KUBE) == 0
    assert sample_value(done.metrics, "gpufrag_watch_source_failures_total", source=DCGM) == 0
    assert sample_value(
        done.metrics, "gpufrag_dcgm_last_success_timestamp_seconds", endpoint=ep.exporter
    )
    assert sample_value(
        done.metrics, "gpufrag_kube_last_success_timestamp_seconds", resource="pods"
    )
    counts = sent_counts(done.stdout)
    assert set(counts) == {DCGM, KUBE}, done.stdout
    assert "(0 late)" in done.stdout

    refused = int(done.stdout.split(" refused inputs, ")[1].split(" sent to ")[0])
    assert refused >= 1, done.stdout  # the absurd pod, at every re-list, each acknowledged
    dead = await consume(kafka_bootstrap, [topics.DEAD_LETTER.full_name(topic_prefix)], refused)
    letters = [orjson.loads(v) for _, _, v in dead]
    assert {(x["source"], x["reason"]) for x in letters} == {("kube/pods", "mapping")}
    assert all(x["detail"].startswith("ml/absurd ") for x in letters)

    names = [t.full_name(topic_prefix) for t in topics.INPUT_BY_KIND.values()]
    got = await consume(kafka_bootstrap, names, sum(n + p for n, p in counts.values()))
    assert len(got) == sum(n + p for n, p in counts.values())
    promised: dict[tuple[str, int], datetime] = {}
    reports: defaultdict[str, dict[tuple[str, int], SourceProgress]] = defaultdict(dict)
    events: list[Envelope] = []
    for topic, partition, value in got:
        if value.startswith(b'{"kind"'):
            progress = SourceProgress.model_validate_json(value)
            promised[(topic, partition)] = progress.upto
            reports[progress.source][(topic, partition)] = progress
            continue
        env = from_json(Envelope, value)
        upto = promised.get((topic, partition))
        assert upto is None or env.event_time > upto, "an event after progress past its time"
        events.append(env)
    samples = [e for e in events if isinstance(e.payload, GpuSampleEvent)]
    assert len(samples) == counts[DCGM][0] >= 4
    assert {
        (e.source, e.payload.sample.node) for e in events if isinstance(e.payload, GpuSampleEvent)
    } == {("dcgm", NODE)}
    nodes = [e.payload.node for e in events if isinstance(e.payload, NodeEvent)]
    assert [(n.name, n.gpu_model) for n in nodes] == [(NODE, "H200")]
    assert [e.payload.pod.name for e in events if isinstance(e.payload, PodEvent)] == ["train-0"]
    # every partition of each source's topics heard it, and its last word covers its events
    gpu_topic = topics.GPU_SAMPLES.full_name(topic_prefix)
    assert {tp for tp in reports[DCGM]} == {
        (gpu_topic, p) for p in range(topics.GPU_SAMPLES.partitions)
    }
    assert {r.kinds for r in reports[DCGM].values()} == {("gpu_sample",)}
    assert min(r.upto for r in reports[DCGM].values()) >= max(e.event_time for e in samples)
    kube_topics = {topics.INPUT_BY_KIND[k].full_name(topic_prefix) for k in topics.INPUT_BY_KIND}
    assert {t for t, _ in reports[KUBE]} == kube_topics - {gpu_topic}
    assert {r.kinds for r in reports[KUBE].values()} == {("node", "pod", "queue", "scheduler")}


async def test_watch_embedded_stores_the_live_events(tmp_path: Path) -> None:
    """Stopped by SIGTERM: what the sources emitted is still stored, and the run is finished."""
    dsn = dsn_for(tmp_path / "store")
    async with live_endpoints(tmp_path) as ep:
        ready = sources_ready(ep, stage="embedded")
        done = await run_watch(
            "--dcgm",
            ep.exporter,
            "--dcgm",
            ep.dead,
            "--bus",
            "embedded",
            "--store",
            dsn,
            env=watch_env(ep),
            metrics_port=free_port(),
            ready=ready,
            terminate_when_ready=True,
        )
    assert done.returncode == 0, done.stderr
    assert ready(done.metrics), done.metrics
    assert "(finished)" in done.stdout and "0 late" in done.stdout, done.stdout
    run_id = done.stdout.split("run ", 1)[1].split()[0]
    with store_at(dsn) as store:
        rows = store.query(
            "SELECT node, count() FROM gpu_samples FINAL WHERE run_id = {r:String} GROUP BY node",
            {"r": run_id},
        ).rows
        # everything emitted before the SIGTERM (and after the last /metrics read) is stored
        emitted = sample_value(done.metrics, "gpufrag_watch_events_total", source=DCGM)
        assert emitted is not None and emitted >= 4
        assert len(rows) == 1 and rows[0][0] == NODE and int(str(rows[0][1])) >= emitted
        run = store.query(
            "SELECT status, source, summary FROM runs FINAL WHERE run_id = {r:String}",
            {"r": run_id},
        ).rows
        assert run[0][:2] == ("finished", f"watch:{KUBE},{DCGM}")
        summary = json.loads(str(run[0][2]))
        assert summary["late_events"] == 0 and summary["failed_events"] == 0
        assert summary["refused_inputs"] >= 1  # the absurd pod, at every re-list
        dead = store.query("SELECT target, reason, row FROM dead_letter FINAL").rows
        assert [(str(t), str(r).split(":")[0]) for t, r, _ in dead] == [
            ("source:kube/pods", "mapping")
        ]
        assert "ml/absurd" in str(dead[0][1]) and "cpu_milli" in str(dead[0][1])
        assert '"name":"absurd"' in str(dead[0][2])  # the raw object as the server sent it
        profiles = store.query(
            "SELECT count() FROM node_profiles WHERE run_id = {r:String} AND node = {n:String}",
            {"r": run_id, "n": NODE},
        ).rows
        assert int(str(profiles[0][0])) >= 1  # the watcher's node joined with its samples


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--no-kube"], "no source"),
        (["--no-kube", "--nvml", "--bus", "kafka", "--store", "chdb:///x"], "--store"),
    ],
)
async def test_watch_refuses_what_it_cannot_run(args: list[str], needle: str) -> None:
    proc = await start_watch(*args, env=dict(os.environ))
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 2
    assert needle in err.decode()


class ListOutput:
    def __init__(self) -> None:
        self.ids: list[str] = []

    async def emit(self, item: Emission) -> None:
        if item.env is not None:
            self.ids.append(item.env.id)

    async def dead_letter(self, failure: Failure) -> None:
        raise AssertionError(failure.reason)


def samples(n: int) -> list[Envelope]:
    return [
        Envelope.wrap(
            GpuSampleEvent(sample=GpuSample(node=NODE, gpu_index=i % 2, memory_used_mib=i)),
            event_time=T0 + timedelta(seconds=i // 2),
            source="dcgm",
        )
        for i in range(n)
    ]


async def test_embedded_runner_takes_an_async_source_like_a_sync_one() -> None:
    events = samples(10)
    sync_out, async_out = ListOutput(), ListOutput()
    await EmbeddedRunner(
        source=iter(events), output=sync_out, pipeline=define_pipeline(GpufragSettings()).build()
    ).run()
    stream = LiveStream()
    runner = EmbeddedRunner(
        source=stream, output=async_out, pipeline=define_pipeline(GpufragSettings()).build()
    )
    running = asyncio.create_task(runner.run())
    for env in events:
        await stream.send(env)
    stream.end()
    await asyncio.wait_for(running, 5)
    assert async_out.ids == sync_out.ids == [e.id for e in events]
    assert not runner.interrupted


async def test_stop_does_not_wait_for_a_quiet_async_source() -> None:
    events = samples(3)
    out = ListOutput()
    stream = LiveStream()
    runner = EmbeddedRunner(
        source=stream, output=out, pipeline=define_pipeline(GpufragSettings()).build()
    )
    running = asyncio.create_task(runner.run())
    for env in events:
        await stream.send(env)
    while len(out.ids) < 3:
        await asyncio.sleep(0.01)
    runner.stop()  # nothing more comes from the stream, and it has not ended
    await asyncio.wait_for(running, 2)
    assert out.ids == [e.id for e in events] and runner.interrupted
