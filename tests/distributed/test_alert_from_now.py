"""`gpufrag alert` of a new consumer group on a signals topic that holds history, against the
real broker, a real Alertmanager and a webhook: only the signals open now go out (the resolved
history is skipped and counted), then news flows as before, and a restart with the same group
resumes from its commit and sends nothing again; `--from-beginning` sends the history."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from connectors.kafka.producer import acked_producer
from models import KafkaSettings, Signal, to_json
from streams.app.lifecycle.bus import Bus
from streams.distributed import topics
from tests.app.metrics_scrape import parse, summed
from tests.connectors.alerts.alerting import storm, until
from tests.connectors.alerts.alertmanager_proc import Alertmanager
from tests.connectors.alerts.receiver import Receiver
from tests.distributed.worker_helpers import kafka_env
from tests.ports import free_port

WITHIN_S = 180.0
"""A busy 2-core machine: the alerter's start, the group's join and the catch-up together."""


class Alerter:
    """`gpufrag alert` as a subprocess in the default group of a test's topic prefix."""

    def __init__(self, bootstrap: str, prefix: str, log: Path, sinks: dict[str, str]) -> None:
        self.bootstrap, self.prefix, self.log, self.sinks = bootstrap, prefix, log, sinks
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, *options: str) -> None:
        env = {
            **kafka_env(self.bootstrap),
            **self.sinks,
            "GPUFRAG_ALERTS__CLUSTER": "kafka-test",
            "GPUFRAG_ALERTS__RESEND_INTERVAL_S": "1",
        }
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "streams.app", "alert", "--prefix", self.prefix, *options],
            stdout=self.log.open("wb"),
            stderr=subprocess.STDOUT,
            env=env,
        )

    async def stop(self) -> str:
        """SIGTERM; the whole output, once it exited 0."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        rc = await asyncio.to_thread(self.proc.wait, 60)
        out = self.log.read_text()
        assert rc == 0, out[-3000:]
        return out

    async def committed_all(self) -> bool:
        """The group's commit is at the end of every partition: all it read is settled."""
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap,
            group_id=f"{self.prefix}gpufrag-alert",
            enable_auto_commit=False,
        )
        await consumer.start()
        try:
            tps = [
                TopicPartition(topics.SIGNALS.full_name(self.prefix), p)
                for p in range(topics.SIGNALS.partitions)
            ]
            ends = await consumer.end_offsets(tps)
            for tp in tps:
                committed = await consumer.committed(tp)
                if committed is None or committed < ends[tp]:
                    return False
            return True
        finally:
            await consumer.stop()


async def publish(bootstrap: str, prefix: str, signals: list[Signal]) -> None:
    """Onto the signals topic keyed by fingerprint, as the workers send them."""
    kafka = KafkaSettings(bootstrap=bootstrap)
    await Bus(kafka, prefix).ensure_topics()
    producer = acked_producer(kafka, client_id="test-alert-from-now")
    await producer.start()
    try:
        for s in signals:
            await producer.send_and_wait(
                topics.SIGNALS.full_name(prefix), key=s.fingerprint.encode(), value=to_json(s)
            )
    finally:
        await producer.stop()


def hooked(hook: Receiver) -> list[tuple[str, str]]:
    """(node, status) of every alert the webhook received, in order."""
    return [(a["labels"]["node"], a["status"]) for b in hook.bodies for a in b["alerts"]]


async def scrape(port: int) -> dict[str, float]:
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session,
        session.get(f"http://127.0.0.1:{port}/metrics") as resp,
    ):
        got = parse(await resp.text())
    name = "gpufrag_alerts_history_skipped_total"
    return {r: summed(got, name, reason=r) for r in ("resolved", "superseded")}


HISTORY = [
    *(storm(f"old-{i}") for i in range(100)),
    *(storm(f"open-{j}") for j in range(3)),
    *(storm(f"old-{i}", resolved_after_s=30) for i in range(100)),
]
"""100 signals opened and resolved, and 3 opened in the middle of them and still open."""
OPEN_NOW = [("open-0", "firing"), ("open-1", "firing"), ("open-2", "firing")]


@pytest.mark.alertmanager
@pytest.mark.kafka
async def test_a_new_group_sends_the_open_signals_only_then_news_then_nothing_again(
    kafka_bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    am = Alertmanager(tmp_path)
    await am.start()
    hook = Receiver()
    await hook.start()
    sinks = {"GPUFRAG_ALERTS__ALERTMANAGER_URL": am.url, "GPUFRAG_ALERTS__WEBHOOK_URL": hook.url}
    alerter = Alerter(kafka_bootstrap, topic_prefix, tmp_path / "alert.log", sinks)
    try:
        await publish(kafka_bootstrap, topic_prefix, HISTORY)
        port = free_port()
        alerter.start("--metrics-port", str(port))
        try:
            await until(alerter.committed_all, within_s=WITHIN_S)
            # committed after both sinks took the batch: nothing more of the history comes
            assert sorted(hooked(hook)) == OPEN_NOW
            await until(lambda: firing_is(am, {"open-0", "open-1", "open-2"}), within_s=WITHIN_S)
            assert await scrape(port) == {"resolved": 200.0, "superseded": 0.0}

            news = [storm("new-0"), storm("open-1", resolved_after_s=60)]
            await publish(kafka_bootstrap, topic_prefix, news)
            await until(lambda: len(hooked(hook)) >= 5, within_s=WITHIN_S)
            await until(lambda: firing_is(am, {"new-0", "open-0", "open-2"}), within_s=WITHIN_S)
            await until(alerter.committed_all, within_s=WITHIN_S)
        finally:
            out = await alerter.stop()
        assert sorted(hooked(hook)[3:]) == [("new-0", "firing"), ("open-1", "resolved")]
        assert "205 signal records" in out, out[-3000:]
        assert "200 history records skipped" in out, out[-3000:]
        assert "alerts start at the signals open now" in out, out[-3000:]

        # restarted in the same group: resumes from its commit; only what is new goes out
        seen = len(hooked(hook))
        alerter.start()
        try:
            await publish(kafka_bootstrap, topic_prefix, [storm("new-1")])
            await until(lambda: len(hooked(hook)) > seen, within_s=WITHIN_S)
            await until(alerter.committed_all, within_s=WITHIN_S)
        finally:
            out = await alerter.stop()
        assert hooked(hook)[seen:] == [("new-1", "firing")]
        assert "1 signal records" in out and "0 history records skipped" in out, out[-3000:]
        assert "1 alerts to alertmanager: 1 sent" in out, out[-3000:]
    finally:
        await hook.stop()
        await am.stop()


async def firing_is(am: Alertmanager, nodes: set[str]) -> bool:
    """Exactly ``nodes`` are firing in Alertmanager (resolved ones are not listed)."""
    alerts: list[Any] = await am.alerts()
    return sorted(
        a["labels"]["node"] for a in alerts if a["status"]["state"] == "active"
    ) == sorted(nodes)


@pytest.mark.kafka
async def test_from_beginning_sends_a_new_group_the_history(
    kafka_bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    hook = Receiver()
    await hook.start()
    alerter = Alerter(
        kafka_bootstrap,
        topic_prefix,
        tmp_path / "alert.log",
        {"GPUFRAG_ALERTS__WEBHOOK_URL": hook.url},
    )
    try:
        history = [
            *(storm(f"old-{i}") for i in range(5)),
            storm("open-0"),
            *(storm(f"old-{i}", resolved_after_s=30) for i in range(5)),
        ]
        await publish(kafka_bootstrap, topic_prefix, history)
        alerter.start("--from-beginning")
        try:
            await until(alerter.committed_all, within_s=WITHIN_S)
        finally:
            out = await alerter.stop()
        got = set(hooked(hook))
        assert {(f"old-{i}", "resolved") for i in range(5)} <= got
        assert ("open-0", "firing") in got
        assert "11 signal records" in out and "0 history records skipped" in out, out[-3000:]
    finally:
        await hook.stop()
