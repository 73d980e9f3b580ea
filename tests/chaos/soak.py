"""The chaos soak's moving parts: a broker of its own, three Faust workers on one app id, the
sink, the alerter with Alertmanager, the actuator in enforce mode against a kube-apiserver of
the soak's own, a publisher at a steady rate, and faults from a seeded schedule while it
publishes.

Faults run one after another, each at its scheduled time or when the one before it is over,
whichever is later, so each meets a running system: a worker killed with SIGKILL and started
again, a fourth worker added and later removed (two rebalances), the broker stopped for
``outage_s`` and started on the same data, the sink killed with SIGKILL and started again on
the same store and group, malformed records on an input topic (dead letters, each with the
sink's run id), Alertmanager stopped for ``alertmanager_down_s`` while the alerter goes on
(a real Alertmanager, Debian's, started again on the same port and storage), and the
actuator's Lease lost to a second actuator (the holder frozen with SIGSTOP until the other
holds the Lease, then let go on: it finds the Lease gone and waits as the standby). The long
form repeats the cycle across its span.
"""

from __future__ import annotations

import asyncio
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from aiokafka import AIOKafkaProducer

from connectors.kube import api_client_for
from models import KubeSettings
from streams.distributed import topics
from tests.connectors.alerts.alertmanager_proc import Alertmanager
from tests.connectors.kube.actuator_helpers import lease_holder
from tests.distributed.actions_topic import start_actuate
from tests.distributed.worker_helpers import (
    KAFKA_SH,
    kafka_env,
    start_sink,
    start_worker,
    stop_processes,
)
from tests.ports import free_port

CYCLE = (
    "kill_worker",
    "add_worker",
    "broker_outage",
    "malformed",
    "alertmanager_down",
    "lease_lost",
    "kill_sink",
    "remove_worker",
)
"""One round of faults; the seed orders the first six (the removal closes the round, after
the addition it undoes, and the sink's kill comes after the outage so it restarts against a
broker that is back)."""
FIRST_ORDERED = 6
ALERTER_RESEND_S = 5.0
"""How often the alerter sends its open alerts again: an Alertmanager back from its outage
lists them within this (the default, 60 s, would only slow the check down)."""
MALFORMED = (b"{broken", b'{"kind": "pod"}', b"\xff\xfe", b"[]")
LEASE_NAMESPACE = "default"
LEASE = {
    "GPUFRAG_ACTUATOR__LEASE_DURATION_S": "6",
    "GPUFRAG_ACTUATOR__RENEW_DEADLINE_S": "4",
    "GPUFRAG_ACTUATOR__RENEW_INTERVAL_S": "1",
}
"""Short, so a frozen holder's Lease runs out within seconds (the default is 15 s)."""
ACTUATORS = ("a", "b")


@dataclass(frozen=True, slots=True)
class Fault:
    at_s: float
    kind: str
    target: int = 0
    """Which of the three workers a kill hits."""


def schedule(seed: int, *, span_s: float, rounds: int = 1) -> list[Fault]:
    """``rounds`` rounds of ``CYCLE`` spread over ``span_s`` seconds of publishing, at seeded
    times within each round's share."""
    rng = random.Random(seed)
    out: list[Fault] = []
    share = span_s / rounds
    for r in range(rounds):
        head = list(CYCLE[:FIRST_ORDERED])
        rng.shuffle(head)
        kinds = [*head, *CYCLE[FIRST_ORDERED:]]
        # in the first half: the faults themselves take a minute or more (restarts, the outage)
        times = sorted(rng.uniform(0.02, 0.5) * share for _ in kinds)
        out += [
            Fault(r * share + t, k, rng.randrange(3)) for t, k in zip(times, kinds, strict=True)
        ]
    return out


@dataclass
class Soak:
    bootstrap: str
    broker_env: dict[str, str]
    prefix: str
    dsn: str
    work: Path
    kubeconfig: Path
    """The soak's own kube-apiserver, holding the input's pods."""
    run_for_s: float
    """How long the actuators run at most (``--duration-s``): the span and the catch-up."""
    outage_s: float = 30.0
    alertmanager_down_s: float = 60.0
    workers: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    actuators: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    sink: subprocess.Popen[bytes] | None = None
    alerter: subprocess.Popen[bytes] | None = None
    am: Alertmanager | None = None
    done: list[str] = field(default_factory=list)
    """What was done, in order, with the time it took (for the closing note and failures)."""
    _incarnation: int = 0
    malformed_sent: int = 0

    def _log(self, name: str) -> Path:
        self._incarnation += 1
        return self.work / f"{name}-{self._incarnation}.log"

    def start(self) -> None:
        for i in range(3):
            self.workers[f"w{i}"] = start_worker(self.bootstrap, self.prefix, self._log(f"w{i}"))
        self.sink = start_sink(self.bootstrap, self.prefix, self.dsn, self._log("sink"))
        self._start_actuator(ACTUATORS[0])
        (self.work / "alertmanager").mkdir()
        self.am = Alertmanager(self.work / "alertmanager")
        asyncio.run(self.am.start())
        self.alerter = subprocess.Popen(
            [
                *(sys.executable, "-m", "streams.app", "alert", "--prefix", self.prefix),
                *("--from-beginning", "--loglevel", "info"),
            ],
            stdout=self._log("alert").open("wb"),
            stderr=subprocess.STDOUT,
            env=kafka_env(
                self.bootstrap,
                {
                    "GPUFRAG_ALERTS__ALERTMANAGER_URL": self.am.url,
                    "GPUFRAG_ALERTS__CLUSTER": "soak",
                    "GPUFRAG_ALERTS__RESEND_INTERVAL_S": str(ALERTER_RESEND_S),
                },
            ),
        )

    def _start_actuator(self, identity: str) -> None:
        self.actuators[identity], _ = start_actuate(
            self.bootstrap,
            self.prefix,
            self.kubeconfig,
            mode="enforce",
            namespace=LEASE_NAMESPACE,
            metrics_port=free_port(),
            settings=LEASE,
            identity=identity,
            duration_s=self.run_for_s,
        )

    def actuator_log(self, identity: str) -> str:
        return (self.kubeconfig.parent / f"actuate-{identity}.log").read_text(errors="replace")

    def lease_holder(self) -> str | None:
        return asyncio.run(self._lease_holder())

    async def _lease_holder(self) -> str | None:
        client = await api_client_for(KubeSettings(kubeconfig=str(self.kubeconfig)))
        try:
            return await lease_holder(client, LEASE_NAMESPACE, "gpufrag-actuator")
        except Exception:  # not created yet: no actuator has won it
            return None
        finally:
            await client.close()

    def _until_holder(self, wanted: set[str], *, timeout_s: float) -> str:
        deadline = time.monotonic() + timeout_s
        while (held := self.lease_holder()) not in wanted:
            assert time.monotonic() < deadline, f"the Lease is {held!r}, never one of {wanted}"
            time.sleep(0.5)
        assert held is not None
        return held

    def alert_fingerprints(self) -> set[str]:
        """The fingerprints of the alerts Alertmanager lists as not ended."""
        assert self.am is not None
        listed = asyncio.run(self.am.alerts())
        return {str(a["labels"]["fingerprint"]) for a in listed}  # type: ignore[index]

    def run_faults(self, faults: list[Fault], publisher: subprocess.Popen[bytes]) -> None:
        t0 = time.monotonic()
        for f in faults:
            wait = t0 + f.at_s - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            began = time.monotonic()
            getattr(self, f"_{f.kind}")(f)
            self.done.append(
                f"{began - t0:6.1f} s {f.kind} ({time.monotonic() - began:.1f} s)"
                f"{' mid-stream' if publisher.poll() is None else ' after the stream'}"
            )

    def _kill_worker(self, f: Fault) -> None:
        name = f"w{f.target}"
        self.workers[name].kill()
        self.workers[name].wait(60)
        self.workers[name] = start_worker(self.bootstrap, self.prefix, self._log(name))

    def _add_worker(self, f: Fault) -> None:
        self.workers["w3"] = start_worker(self.bootstrap, self.prefix, self._log("w3"))

    def _remove_worker(self, f: Fault) -> None:
        extra = self.workers.pop("w3")
        extra.send_signal(signal.SIGTERM)
        extra.wait(120)

    def _broker_outage(self, f: Fault) -> None:
        stop = subprocess.run(
            ["bash", str(KAFKA_SH), "stop", "--keep-data"], env=self.broker_env, timeout=120
        )
        assert stop.returncode == 0
        time.sleep(self.outage_s)
        start = subprocess.run(
            ["bash", str(KAFKA_SH), "start"],
            env=self.broker_env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert start.returncode == 0, start.stderr
        assert start.stdout.strip().splitlines()[-1] == self.bootstrap

    def _kill_sink(self, f: Fault) -> None:
        assert self.sink is not None
        self.sink.kill()
        self.sink.wait(60)
        self.sink = start_sink(self.bootstrap, self.prefix, self.dsn, self._log("sink"))

    def _alertmanager_down(self, f: Fault) -> None:
        assert self.am is not None
        asyncio.run(self.am.stop())
        time.sleep(self.alertmanager_down_s)
        asyncio.run(self.am.start())

    def _lease_lost(self, f: Fault) -> None:
        holder = self._until_holder(set(ACTUATORS), timeout_s=120)
        other = next(a for a in ACTUATORS if a != holder)
        if other not in self.actuators or self.actuators[other].poll() is not None:
            self._start_actuator(other)
        frozen = self.actuators[holder]
        frozen.send_signal(signal.SIGSTOP)
        try:
            self._until_holder({other}, timeout_s=120)
        finally:
            frozen.send_signal(signal.SIGCONT)

    def _malformed(self, f: Fault) -> None:
        asyncio.run(self._send_malformed())

    async def _send_malformed(self) -> None:
        producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, acks="all")
        await producer.start()
        try:
            for raw in MALFORMED:
                await producer.send_and_wait(
                    topics.PODS.full_name(self.prefix), value=raw, key=b"chaos/junk"
                )
                self.malformed_sent += 1
        finally:
            await producer.stop()

    def stop(self) -> int:
        """Stop everything (SIGTERM, then SIGKILL after a minute); the sink's exit status."""
        others = [p for p in (self.sink, self.alerter) if p is not None]
        stop_processes(*self.workers.values(), *others, *self.actuators.values())
        if self.am is not None:
            asyncio.run(self.am.stop())
        return -1 if self.sink is None else int(self.sink.returncode)


def publisher(
    bootstrap: str, prefix: str, options: list[str], rate: float, *, log: Path
) -> subprocess.Popen[bytes]:
    """`gpufrag publish` at ``rate`` events a second, its log (warnings included: each
    producer it replaced, and why) written to ``log`` and kept with the run's files."""
    with log.open("wb") as out:
        return subprocess.Popen(
            [
                *(sys.executable, "-m", "streams.app", "publish", "--prefix", prefix),
                *(*options, "--rate", f"{rate:.2f}"),
            ],
            env=kafka_env(bootstrap),
            stdout=subprocess.DEVNULL,
            stderr=out,
        )
