"""Alert sinks: signals to Alertmanager, a Slack incoming webhook and a generic JSON webhook,
grouped and deduplicated by fingerprint, retried, and dead-lettered when a sink stays down."""

from connectors.alerts.alert import Alert, alert_of
from connectors.alerts.dispatcher import AlertDispatcher
from connectors.alerts.sinks import (
    AlertmanagerSink,
    AlertSink,
    SlackSink,
    WebhookSink,
    sinks_from,
)

__all__ = [
    "Alert",
    "AlertDispatcher",
    "AlertSink",
    "AlertmanagerSink",
    "SlackSink",
    "WebhookSink",
    "alert_of",
    "sinks_from",
]
