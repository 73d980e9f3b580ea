"""Alert sinks: signals to Alertmanager, a Slack incoming webhook, a generic JSON webhook and any
sink an extension registers, grouped and deduplicated by fingerprint, retried, and
dead-lettered when a sink stays down."""

from connectors.alerts.alert import Alert, alert_of
from connectors.alerts.dispatcher import AlertDispatcher
from connectors.alerts.sink_registry import (
    ALERT_SINKS,
    AlertSink,
    AlertSinkBuilder,
    SinkError,
    SinkNotConfigured,
    sinks_from,
)
from connectors.alerts.sinks import AlertmanagerSink, HttpJsonSink, SlackSink, WebhookSink

__all__ = [
    "ALERT_SINKS",
    "Alert",
    "AlertDispatcher",
    "AlertSink",
    "AlertSinkBuilder",
    "AlertmanagerSink",
    "HttpJsonSink",
    "SinkError",
    "SinkNotConfigured",
    "SlackSink",
    "WebhookSink",
    "alert_of",
    "sinks_from",
]
