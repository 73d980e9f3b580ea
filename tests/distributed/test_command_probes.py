"""Every long-running command answers /livez, /readyz and /metrics on its --metrics-port, and
404 on any other path: worker, sink, alert and actuate against the real broker, and a replay.
(`watch` has its own test against the real kube-apiserver: tests/app/test_health.py.)"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from connectors.trace.bundled import bundled_pods_path
from tests.app.pipeline_helpers import dsn_for
from tests.distributed.worker_helpers import kafka_env
from tests.http_probe import get, wait_ready
from tests.paths import REPO_ROOT
from tests.ports import free_port

DEADLINE_S = 180.0

COMMANDS: dict[str, tuple[list[str], set[str]]] = {
    # command line after `gpufrag` (PREFIX, STORE, PODS filled in), and its readiness checks
    "worker": (
        ["worker", "--prefix", "PREFIX", "--app-id", "PREFIXapp", "--typical-from", "PODS"],
        {"partitions assigned"},
    ),
    "sink": (
        ["sink", "--prefix", "PREFIX", "--store", "STORE"],
        {"store writable", "partitions assigned"},
    ),
    "alert": (["alert", "--prefix", "PREFIX"], {"partitions assigned"}),
    "actuate": (["actuate", "--prefix", "PREFIX"], {"bus connected"}),
}


def _start(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "streams.app", *argv],
        cwd=REPO_ROOT,
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )


@pytest.mark.kafka
@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_long_running_command_answers_its_probes(
    command: str, kafka_bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    args, checks = COMMANDS[command]
    fills = {
        "PREFIX": topic_prefix,
        "STORE": dsn_for(tmp_path / "store"),
        "PODS": str(bundled_pods_path()),
    }
    argv = [fills.get(a, a.replace("PREFIX", topic_prefix)) for a in args]
    port = free_port()
    env = kafka_env(kafka_bootstrap)
    env["GPUFRAG_ALERTS__WEBHOOK_URL"] = "http://127.0.0.1:9/hook"  # alert needs one sink
    log = tmp_path / f"{command}.log"
    proc = _start([*argv, "--metrics-port", str(port)], env, log)
    try:
        answer = wait_ready(port, deadline_s=DEADLINE_S, alive=proc)
        assert set(answer["checks"]) == checks  # type: ignore[arg-type]
        assert get(port, "/livez")[0] == 200
        assert get(port, "/metrics")[0] == 200
        assert get(port, "/nope")[0] == 404
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(DEADLINE_S)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode in (0, -signal.SIGTERM), log.read_text()[-3000:]


def test_a_replay_answers_its_probes_while_it_runs(tmp_path: Path) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUFRAG_")}
    log = tmp_path / "replay.log"
    proc = _start(
        ["replay", "--store", dsn_for(tmp_path / "store"), "--metrics-port", str(port)], env, log
    )
    try:
        answer = wait_ready(port, deadline_s=DEADLINE_S, alive=proc)
        assert answer["checks"] == {"store writable": True}
        assert get(port, "/livez")[0] == 200
        assert get(port, "/nope")[0] == 404
        assert "gpufrag_" in get(port, "/metrics")[1]
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(DEADLINE_S)
    assert proc.returncode in (0, 130), log.read_text()[-3000:]
