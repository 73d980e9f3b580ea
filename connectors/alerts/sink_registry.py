"""What an alert sink is, and the registry of sink kinds the settings switch on.

A sink takes batches of alerts and says, by raising ``SinkError``, whether a failed batch is
worth trying again; everything else (the latest state per fingerprint, retries with backoff,
the give-up deadline, dead letters, the per-sink counts and metrics) is the dispatcher's, so a
sink that is not HTTP gets the same delivery guarantees as the built-in ones. Each kind of sink
is a name mapped to a builder, registered with one line, the built-ins (``sinks.py``) the same
way as an extension loaded through ``GPUFRAG_PLUGINS``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Protocol

from connectors.alerts.alert import Alert
from models.component_registry import Registry
from models.settings import AlertSettings

__all__ = [
    "ALERT_SINKS",
    "AlertSink",
    "AlertSinkBuilder",
    "SinkError",
    "SinkNotConfigured",
    "sinks_from",
]


class SinkError(Exception):
    """One batch was not delivered. The text must never quote a secret (a URL's path or
    token): it ends up in logs, metrics labels and dead letters."""

    def __init__(self, reason: str, detail: str, *, retriable: bool) -> None:
        super().__init__(detail)
        self.reason = reason
        """A short code for metrics and dead letters: ``unreachable``, ``timeout``,
        ``http_<status>``, ``error`` (anything else a sink raised)."""
        self.detail = detail
        self.retriable = retriable
        """False: the receiver refuses these alerts as such, and each is tried alone and then
        dead-lettered (``rejected``); True: the batch is tried again after a backoff."""


class AlertSink(Protocol):
    @property
    def name(self) -> str:
        """Names the sink in metrics, logs and dead letters (never the URL: Slack's is a
        secret)."""

    @property
    def resends(self) -> bool:
        """Whether open alerts are delivered again every resend interval (a receiver that
        forgets them, as Alertmanager does on restart)."""

    @property
    def max_batch(self) -> int:
        """The most alerts one ``send`` gets."""

    async def start(self) -> None:
        """Before the first ``send``: open what the sink holds (a connection pool, a file)."""

    async def send(self, alerts: Sequence[Alert], *, now: datetime) -> None:
        """Deliver one batch, or raise ``SinkError``; the dispatcher bounds the call by
        ``GPUFRAG_ALERTS__TIMEOUT_S`` and counts any other exception as a retriable failure."""

    async def stop(self) -> None:
        """After the last ``send``: release what ``start`` opened."""


AlertSinkBuilder = Callable[[AlertSettings], AlertSink | None]
"""The sink as the settings configure it, or None when they leave it off (a built-in whose URL
is unset, an extension that ``GPUFRAG_ALERTS__SINKS`` does not name)."""

ALERT_SINKS: Registry[AlertSinkBuilder] = Registry("alert sink")


class SinkNotConfigured(ValueError):
    """``GPUFRAG_ALERTS__SINKS`` names a sink its settings leave off (a built-in without its
    URL): the operator asked for alerts that would never be sent."""


def sinks_from(settings: AlertSettings) -> list[AlertSink]:
    """Every sink the settings switch on, in registration order (the built-ins first). A name
    in ``settings.sinks`` must be registered and must build; the others build when their own
    settings say so."""
    ALERT_SINKS.check(settings.sinks)
    out: list[AlertSink] = []
    for name, build in ALERT_SINKS.items():
        sink = build(settings)
        if sink is not None:
            out.append(sink)
        elif name in settings.sinks:
            raise SinkNotConfigured(
                f"alert sink {name!r} is named in GPUFRAG_ALERTS__SINKS but its settings "
                "leave it off (a built-in sink needs its URL)"
            )
    return out
