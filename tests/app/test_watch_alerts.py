"""`gpufrag watch --bus embedded --alerts`: a signal the embedded pipeline opens from a live
source reaches the webhook while it is stored; one the webhook refuses or never answers is
counted dead-lettered, not sent, and holds no SIGTERM; and the refusals of the option and of
bad alert settings."""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from connectors.alerts.dispatcher import STOP_DRAIN_MAX_S
from tests.app.pipeline_helpers import dsn_for, store_at, stored_signals
from tests.app.watch_helpers import NODE, PAGE, sick_node
from tests.app.watch_helpers import clean_env as _env
from tests.app.watch_helpers import kubeconfig_for as _kubeconfig
from tests.app.watch_helpers import start_watch as _watch
from tests.connectors.alerts.alerting import until
from tests.connectors.alerts.receiver import Receiver
from tests.connectors.dcgm.exporter_server import FakeExporter
from tests.kube_fake import FakeApiServer, FakeCluster


@dataclass
class _Watched:
    returncode: int | None
    out: str
    err: str
    stop_s: float
    """From the SIGTERM to the exit."""


async def _watch_until(
    tmp_path: Path, hook: Receiver, done: Callable[[], bool], **env: str
) -> _Watched:
    """`watch --bus embedded --alerts` of a node whose cards are out (one gpu_unhealthy
    signal), its webhook ``hook``, until ``done`` holds; then SIGTERM, as a pod is stopped."""
    cluster = FakeCluster()
    cluster.apply(sick_node())
    server = FakeApiServer(cluster)
    exporter = FakeExporter(PAGE.read_bytes())  # events every scrape: instants get evaluated
    for svc in (server, exporter, hook):
        await svc.start()
    loop = asyncio.get_running_loop()
    stopped_at = loop.time()
    try:
        environ = _env(
            GPUFRAG_KUBE__KUBECONFIG=str(_kubeconfig(tmp_path / "kubeconfig", server)),
            GPUFRAG_KUBE__RESOURCES='["pods", "nodes"]',
            GPUFRAG_DCGM__INTERVAL_S="0.5",
            GPUFRAG_ALERTS__WEBHOOK_URL=hook.url,
            GPUFRAG_ALERTS__CLUSTER="live-test",
            **env,
        )
        dsn = dsn_for(tmp_path / "store")
        args = ("--dcgm", exporter.url, "--bus", "embedded", "--store", dsn, "--alerts")
        proc = await _watch(*args, env=environ)
        communicate = asyncio.create_task(proc.communicate())
        try:
            await until(lambda: done() or communicate.done(), within_s=120)
        finally:
            if proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
                stopped_at = loop.time()
            try:
                out, err = await asyncio.wait_for(communicate, 120)
            finally:
                if proc.returncode is None:
                    proc.kill()  # a watch that ignored SIGTERM: the test fails, nothing leaks
    finally:
        for svc in (hook, exporter, server):
            await svc.stop()
        await cluster.close()
    return _Watched(proc.returncode, out.decode(), err.decode(), loop.time() - stopped_at)


async def test_a_signal_of_the_live_pipeline_reaches_the_webhook(tmp_path: Path) -> None:
    hook = Receiver()
    got = await _watch_until(tmp_path, hook, lambda: bool(hook.bodies))
    assert got.returncode == 0, got.err[-3000:]
    assert "1 alerts to webhook: 1 sent, 0 dead-lettered)" in got.out, got.out
    alert = hook.bodies[0]["alerts"][0]
    assert alert["status"] == "firing"
    assert alert["labels"]["alertname"] == "gpu_unhealthy"
    assert (alert["labels"]["node"], alert["labels"]["cluster"]) == (NODE, "live-test")
    assert "AcceleratedHardwareReady" in alert["annotations"]["summary"]
    stored = [
        s for s in stored_signals(dsn_for(tmp_path / "store")) if s["kind"] == "gpu_unhealthy"
    ]
    assert [s["fingerprint"] for s in stored] == [alert["fingerprint"]]


@pytest.mark.parametrize(
    ("status", "hang", "reason"),
    [(400, False, "rejected"), (200, True, "shutdown")],
    ids=["refused", "never-answers"],
)
async def test_an_alert_the_webhook_never_took_is_counted_dead_lettered_not_sent(
    tmp_path: Path, status: int, hang: bool, reason: str
) -> None:
    """A receiver that refuses the alert, or takes the POST and never answers with the longest
    timeout allowed: SIGTERM still ends the run within the bounded drain, the summary counts
    the alert as dead-lettered, and the store keeps it with why."""
    hook = Receiver()
    hook.status, hook.hang = status, hang
    got = await _watch_until(
        tmp_path, hook, lambda: hook.hits >= 1, GPUFRAG_ALERTS__TIMEOUT_S="300"
    )
    assert got.returncode == 0, got.err[-3000:]
    assert got.stop_s < STOP_DRAIN_MAX_S + 60, got.stop_s  # not the 300 s timeout
    assert "1 alerts to webhook: 0 sent, 1 dead-lettered)" in got.out, got.out
    with store_at(dsn_for(tmp_path / "store")) as st:
        rows = st.query(
            "SELECT reason FROM dead_letter WHERE target = 'source:alerts/webhook'"
        ).rows
        summary = st.query("SELECT summary FROM runs FINAL").rows
    assert len(rows) == 1 and str(rows[0][0]).startswith(reason), rows
    alerts = json.loads(str(summary[0][0]))["alerts"]
    assert (alerts["sent"], alerts["dead_lettered"]) == ({"webhook": 0}, {"webhook": 1})


async def test_alerts_are_refused_without_a_sink_or_on_the_kafka_bus() -> None:
    for args, needle in (
        (("--no-kube", "--nvml", "--bus", "embedded", "--alerts"), "no alert sink"),
        (("--no-kube", "--nvml", "--bus", "kafka", "--alerts"), "gpufrag alert"),
    ):
        env = _env(GPUFRAG_ALERTS__WEBHOOK_URL="http://127.0.0.1:9/") if "kafka" in args else _env()
        proc = await _watch(*args, env=env)
        _, err = await asyncio.wait_for(proc.communicate(), 120)
        assert proc.returncode == 2, err.decode()
        assert needle in err.decode(), err.decode()


FINITE = "Input should be a finite number"
SCHEME = "the URL must start with http:// or https://"
PORT = "the URL's port must be a number from 1 to 65535"
BAD_SETTINGS = [
    pytest.param("TIMEOUT_S", "inf", FINITE, id="timeout-inf"),
    pytest.param("TIMEOUT_S", "1e309", FINITE, id="timeout-1e309"),
    pytest.param("TIMEOUT_S", "nan", FINITE, id="timeout-nan"),
    pytest.param(
        "TIMEOUT_S", "301", "Input should be less than or equal to 300", id="timeout-over-cap"
    ),
    pytest.param("GIVE_UP_AFTER_S", "inf", FINITE, id="give-up-inf"),
    pytest.param("RESEND_INTERVAL_S", "1e309", FINITE, id="resend-1e309"),
    pytest.param("RETRY_MAX_S", "inf", FINITE, id="retry-max-inf"),
    pytest.param(
        "ALERTMANAGER_URL",
        "not a url",
        "not a URL: it has spaces or control characters",
        id="am-not-a-url",
    ),
    pytest.param("ALERTMANAGER_URL", "ftp://", SCHEME, id="am-ftp"),
    pytest.param("ALERTMANAGER_URL", "file:///etc/passwd", SCHEME, id="am-file"),
    pytest.param("ALERTMANAGER_URL", "http://am:99999", PORT, id="am-port-99999"),
    pytest.param("ALERTMANAGER_URL", "http://am:0", PORT, id="am-port-0"),
    pytest.param("WEBHOOK_URL", "http:///hook", "the URL has no host", id="webhook-no-host"),
    pytest.param(
        "WEBHOOK_URL", "http://[::1/hook", "not a well-formed URL", id="webhook-open-ipv6"
    ),
    pytest.param(
        "SLACK_WEBHOOK_URL",
        "htps://hooks.slack.com/services/T0SEKRET/B0SEKRET/xoxbSEKRET",
        SCHEME,
        id="slack-bad-scheme-with-token",
    ),
    pytest.param("RUNBOOK_BASE_URL", "javascript:alert(1)", SCHEME, id="runbook-javascript"),
]


@pytest.mark.parametrize(("key", "value", "why"), BAD_SETTINGS)
async def test_a_bad_alert_setting_is_refused_in_one_line_at_start(
    tmp_path: Path, key: str, value: str, why: str
) -> None:
    """Refused before any source starts, in one line naming the variable, never quoting the
    value (a Slack webhook's path is its secret)."""
    env = _env(GPUFRAG_ALERTS__WEBHOOK_URL="http://127.0.0.1:9/hook")
    args = ("--no-kube", "--nvml", "--bus", "embedded", "--store", dsn_for(tmp_path / "st"))
    proc = await _watch(
        *args, "--duration-s", "1", "--alerts", env={**env, f"GPUFRAG_ALERTS__{key}": value}
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), 120)
    finally:
        if proc.returncode is None:
            proc.kill()  # a watch the setting made deaf to its end: the test fails
    assert proc.returncode == 2, err.decode()
    assert err.decode().splitlines() == [f"gpufrag: error: setting GPUFRAG_ALERTS__{key}: {why}"]
    assert "sekret" not in (out + err).decode().lower()
