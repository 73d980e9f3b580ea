"""A signal as an alert: labels from the scope and evidence, a short description, the runbook."""

from __future__ import annotations

from datetime import timedelta

import pytest

from connectors.alerts import AlertmanagerSink, SlackSink, WebhookSink, alert_of, sinks_from
from connectors.alerts.alert import DESCRIPTION_MAX_CHARS
from models import GpufragSettings, Scope, Severity, Signal, SignalKind, fingerprint_of
from tests.connectors.alerts.alerting import OPENED, namespace_storm, settings, storm


def _signal(kind: SignalKind, scope: Scope, scope_id: str, **evidence: object) -> Signal:
    return Signal(
        kind=kind,
        scope=scope,
        scope_id=scope_id,
        severity=Severity.WARNING,
        fingerprint=fingerprint_of(kind, scope, scope_id),
        summary="s",
        evidence=evidence,
        opened_at=OPENED,
    )


def test_a_node_storm_has_the_labels_and_annotations_alertmanager_routes_on() -> None:
    alert = alert_of(storm(), settings())
    assert alert.labels == {
        "alertname": "oom_storm",
        "severity": "critical",
        "cluster": "test-cluster",
        "scope": "node",
        "node": "gpu-h200-07",
        "fingerprint": storm().fingerprint,
    }
    assert alert.annotations["summary"] == storm().summary
    assert alert.annotations["runbook_url"] == "https://runbooks.example/gpufrag/oom_storm"
    assert 'aggressor: "a/b"' in alert.annotations["description"]
    assert alert.starts_at == OPENED and alert.ends_at is None and not alert.resolved


def test_places_come_from_the_scope_id_then_the_evidence() -> None:
    s = settings()
    gpu = alert_of(_signal(SignalKind.GPU_UNHEALTHY, Scope.GPU, "node-a/3"), s)
    assert gpu.labels["node"] == "node-a" and "namespace" not in gpu.labels
    ns = alert_of(namespace_storm("team-a", "research"), s)
    assert (ns.labels["namespace"], ns.labels["queue"]) == ("team-a", "research")
    alone = alert_of(_signal(SignalKind.OOM_STORM, Scope.NAMESPACE, "team-b"), s)
    assert alone.labels["namespace"] == "team-b" and "queue" not in alone.labels
    pod = alert_of(
        _signal(SignalKind.NEAR_MEMORY_LIMIT, Scope.POD, "team-a/nb-1", node="node-b"), s
    )
    assert (pod.labels["namespace"], pod.labels["node"]) == ("team-a", "node-b")
    queue = alert_of(_signal(SignalKind.UNPLACEABLE_PENDING, Scope.QUEUE, "gpu-queue"), s)
    assert queue.labels["queue"] == "gpu-queue"
    cluster = alert_of(_signal(SignalKind.FRAGMENTATION, Scope.CLUSTER, "cluster"), s)
    assert not {"node", "namespace", "queue"} & set(cluster.labels)


def test_a_long_evidence_is_cut_and_says_so() -> None:
    big = _signal(
        SignalKind.UNPLACEABLE_PENDING, Scope.POD, "a/p", nodes=[f"n{i}" for i in range(999)]
    )
    text = alert_of(big, settings()).annotations["description"]
    assert len(text) < DESCRIPTION_MAX_CHARS + 40 and text.endswith("chars cut]")


def test_no_runbook_annotation_without_a_base_url() -> None:
    assert "runbook_url" not in alert_of(storm(), settings(runbook_base_url=None)).annotations


def test_alertmanager_gets_an_end_ahead_while_open_and_the_resolution_when_resolved() -> None:
    now = OPENED + timedelta(hours=1)
    sink = AlertmanagerSink("http://am:9093/", resend_interval_s=60)
    assert sink.url == "http://am:9093/api/v2/alerts"
    open_ = alert_of(storm(), settings()).alertmanager(now=now, open_for=timedelta(minutes=4))
    assert open_["startsAt"] == "2026-03-02T09:30:00Z"
    assert open_["endsAt"] == "2026-03-02T10:34:00Z"
    done = alert_of(storm(resolved_after_s=90), settings()).alertmanager(
        now=now, open_for=timedelta(minutes=4)
    )
    assert done["endsAt"] == "2026-03-02T09:31:30Z"


def test_sinks_are_built_only_for_the_urls_that_are_set() -> None:
    assert GpufragSettings().alerts.alertmanager_url is None
    assert sinks_from(settings()) == []
    built = sinks_from(
        settings(alertmanager_url="http://am", slack_webhook_url="http://s", webhook_url="http://w")
    )
    assert [type(s) for s in built] == [AlertmanagerSink, SlackSink, WebhookSink]


def test_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUFRAG_ALERTS__ALERTMANAGER_URL", "http://am:9093")
    monkeypatch.setenv("GPUFRAG_ALERTS__GIVE_UP_AFTER_S", "30")
    got = GpufragSettings().alerts
    assert (got.alertmanager_url, got.give_up_after_s) == ("http://am:9093", 30.0)


@pytest.mark.parametrize(
    "url",
    [
        "https://hooks.slack.com/services/T0000/B0000/XXXXXXXX",
        "http://[::1]:9093",
        "HTTP://alertmanager.monitoring.svc:9093/am/",
        "https://user:pass@hooks.example/path?token=x",
    ],
    ids=["slack", "ipv6", "upper-case-scheme", "userinfo-and-query"],
)
def test_every_kind_of_http_url_a_sink_may_have_is_accepted(url: str) -> None:
    got = settings(alertmanager_url=url, slack_webhook_url=url, webhook_url=url)
    assert (got.alertmanager_url, got.slack_webhook_url, got.webhook_url) == (url, url, url)
