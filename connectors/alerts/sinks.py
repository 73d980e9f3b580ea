"""The three built-in receivers, each one HTTP POST of a JSON body: where, in what body, how
many alerts at a time, and whether open alerts are sent again; and their registration, one line
each, the same as an extension's."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import aiohttp
import orjson

from connectors.alerts.alert import Alert
from connectors.alerts.http_post import post_json
from connectors.alerts.sink_registry import ALERT_SINKS

__all__ = ["AlertmanagerSink", "HttpJsonSink", "SlackSink", "WebhookSink"]

OPEN_FOR_RESENDS = 4
"""An open alert's ``endsAt`` is this many resend intervals ahead: three resends can fail
before Alertmanager resolves it on its own (Prometheus uses 4 the same way)."""


@dataclass(slots=True)
class HttpJsonSink(ABC):
    """What the HTTP sinks share: a connection pool, and each batch one POST of ``body`` to
    ``url`` through ``http_post.post_json`` (5xx, 408, 429 and no answer retriable, other 4xx
    refused; no error text quotes the URL). A subclass gives ``url`` and ``body``."""

    _session: aiohttp.ClientSession | None = field(
        default=None, init=False, repr=False, compare=False
    )

    @property
    @abstractmethod
    def url(self) -> str: ...

    @abstractmethod
    def body(self, alerts: Sequence[Alert], *, now: datetime) -> bytes: ...

    async def start(self) -> None:
        # no timeout of its own: the dispatcher bounds each send by the alert settings' one
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None))

    async def send(self, alerts: Sequence[Alert], *, now: datetime) -> None:
        if self._session is None:
            raise RuntimeError(f"alert sink {type(self).__name__}: start() was not called")
        await post_json(self._session, self.url, self.body(alerts, now=now))

    async def stop(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


@dataclass(slots=True)
class AlertmanagerSink(HttpJsonSink):
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


@dataclass(slots=True)
class SlackSink(HttpJsonSink):
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


@dataclass(slots=True)
class WebhookSink(HttpJsonSink):
    url: str
    name: str = "webhook"
    resends: bool = False
    max_batch: int = 500

    def body(self, alerts: Sequence[Alert], *, now: datetime) -> bytes:
        return orjson.dumps({"source": "gpufrag", "alerts": [a.as_json() for a in alerts]})


ALERT_SINKS.register(
    "alertmanager",
    lambda s: (
        AlertmanagerSink(s.alertmanager_url, s.resend_interval_s) if s.alertmanager_url else None
    ),
)
ALERT_SINKS.register(
    "slack", lambda s: SlackSink(s.slack_webhook_url) if s.slack_webhook_url else None
)
ALERT_SINKS.register("webhook", lambda s: WebhookSink(s.webhook_url) if s.webhook_url else None)
