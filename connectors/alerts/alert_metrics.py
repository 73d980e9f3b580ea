"""The alert sinks' figures, one set per registry, labelled by sink."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

__all__ = ["AlertMetrics"]


class AlertMetrics:
    def __init__(self, registry: CollectorRegistry | None) -> None:
        self.sent = Counter(
            "gpufrag_alerts_sent_total",
            "Alerts a sink accepted (re-sends included)",
            ["sink"],
            registry=registry,
        )
        self.failed = Counter(
            "gpufrag_alerts_failed_posts_total",
            "POSTs a sink did not accept (each is retried until give_up_after_s)",
            ["sink", "reason"],
            registry=registry,
        )
        self.dead_lettered = Counter(
            "gpufrag_alerts_dead_lettered_total",
            "Alerts a sink never accepted, kept as dead letters",
            ["sink", "reason"],
            registry=registry,
        )
        self.repeats = Counter(
            "gpufrag_alerts_repeats_total",
            "Signals dropped as news already sent (same fingerprint, state and text)",
            registry=registry,
        )
        self.pending = Gauge(
            "gpufrag_alerts_pending",
            "Alerts waiting for a sink to accept them",
            ["sink"],
            registry=registry,
        )
