"""The three receivers and what each is sent: where, in what body, how many alerts at a time,
and whether open alerts are sent again. Posting is the dispatcher's; these do no I/O."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

import orjson

from connectors.alerts.alert import Alert
from models.settings import AlertSettings

__all__ = ["AlertSink", "AlertmanagerSink", "SlackSink", "WebhookSink", "sinks_from"]

OPEN_FOR_RESENDS = 4
"""An open alert's ``endsAt`` is this many resend intervals ahead: three resends can fail
before Alertmanager resolves it on its own (Prometheus uses 4 the same way)."""


class AlertSink(Protocol):
    @property
    def name(self) -> str:
        """Names the sink in metrics, logs and dead letters (never the URL: Slack's is a
        secret)."""

    @property
    def url(self) -> str: ...

    @property
    def resends(self) -> bool:
        """Whether open alerts are posted again every resend interval."""

    @property
    def max_batch(self) -> int: ...

    def body(self, alerts: Sequence[Alert], *, now: datetime) -> bytes: ...


@dataclass(frozen=True, slots=True)
class AlertmanagerSink:
    base_url: str
    resend_interval_s: float
    name: str = "alertmanager"
    resends: bool = True
    max_batch: int = 500
    """Alertmanager takes a list; 500 alerts are about 500 KB of JSON, one quick request."""

    @property
    def url(self) -> str:
        return f"{self.base_url.rstrip('/')}/api/v2/alerts"

    def body(self, alerts: Sequence[Alert], *, now: datetime) -> bytes:
        open_for = timedelta(seconds=OPEN_FOR_RESENDS * self.resend_interval_s)
        return orjson.dumps([a.alertmanager(now=now, open_for=open_for) for a in alerts])


@dataclass(frozen=True, slots=True)
class SlackSink:
    url: str
    name: str = "slack"
    resends: bool = False
    max_batch: int = 20
    """Slack shows about 40 lines of a message before "show more"; 20 alerts of two lines."""

    def body(self, alerts: Sequence[Alert], *, now: datetime) -> bytes:
        return orjson.dumps({"text": "\n".join(_slack_line(a) for a in alerts)})


def _slack_line(alert: Alert) -> str:
    labels = alert.labels
    where = ", ".join(f"{k} {labels[k]}" for k in ("node", "namespace", "queue") if k in labels)
    head = "RESOLVED" if alert.resolved else f"FIRING {labels['severity']}"
    line = f"*[{head}] {labels['alertname']}* ({labels['cluster']}{', ' + where if where else ''})"
    line += f"\n{alert.annotations['summary']}"
    if runbook := alert.annotations.get("runbook_url"):
        line += f" <{runbook}|runbook>"
    return line


@dataclass(frozen=True, slots=True)
class WebhookSink:
    url: str
    name: str = "webhook"
    resends: bool = False
    max_batch: int = 500

    def body(self, alerts: Sequence[Alert], *, now: datetime) -> bytes:
        return orjson.dumps({"source": "gpufrag", "alerts": [a.as_json() for a in alerts]})


def sinks_from(settings: AlertSettings) -> list[AlertSink]:
    """The sinks whose URL is set, in a fixed order."""
    out: list[AlertSink] = []
    if settings.alertmanager_url:
        out.append(AlertmanagerSink(settings.alertmanager_url, settings.resend_interval_s))
    if settings.slack_webhook_url:
        out.append(SlackSink(settings.slack_webhook_url))
    if settings.webhook_url:
        out.append(WebhookSink(settings.webhook_url))
    return out
