"""Prometheus metrics of the Kubernetes watchers, one label value per watched resource."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

__all__ = ["KubeMetrics"]


class KubeMetrics:
    """Registered on the registry passed in, so tests and several sources do not collide in
    prometheus-client's global registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.events = Counter(
            "gpufrag_kube_events_total",
            "Envelopes emitted by a watcher",
            ["resource"],
            registry=registry,
        )
        self.errors = Counter(
            "gpufrag_kube_errors_total",
            "Failed requests, broken streams and unreadable objects",
            ["resource", "reason"],
            registry=registry,
        )
        self.reconnects = Counter(
            "gpufrag_kube_reconnects_total",
            "Watches re-opened after a broken or refused stream",
            ["resource"],
            registry=registry,
        )
        self.relists = Counter(
            "gpufrag_kube_relists_total",
            "Completed full lists (the first one, and one after each 410 Gone)",
            ["resource"],
            registry=registry,
        )
        self.last_success = Gauge(
            "gpufrag_kube_last_success_timestamp_seconds",
            "Wall-clock time of the last successful list page or watch event (POSIX s)",
            ["resource"],
            registry=registry,
        )
        self.objects = Gauge(
            "gpufrag_kube_objects",
            "Objects the watcher holds (equals the live objects it watches)",
            ["resource"],
            registry=registry,
        )
        self.missing = Gauge(
            "gpufrag_kube_resource_missing",
            "1 while the API server does not serve the resource (CRD not installed)",
            ["resource"],
            registry=registry,
        )
