"""The scraper's own Prometheus metrics, one series set per exporter endpoint."""

from __future__ import annotations

from contextlib import suppress
from typing import Literal, get_args

from prometheus_client import CollectorRegistry, Counter, Gauge

from connectors.dcgm.exposition import RejectKind

__all__ = ["ErrorReason", "ScrapeMetrics"]

ErrorReason = Literal[
    "connect", "timeout", "http_status", "http", "too_large", "no_samples", "emit", "internal"
]
"""Why a scrape failed; a fixed set so the metric's cardinality stays bounded."""


class ScrapeMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.emitted = Counter(
            "gpufrag_dcgm_samples_emitted_total",
            "GPU samples emitted from an exporter",
            ["endpoint"],
            registry=registry,
        )
        self.errors = Counter(
            "gpufrag_dcgm_scrape_errors_total",
            "Failed scrapes of an exporter, by reason",
            ["endpoint", "reason"],
            registry=registry,
        )
        self.rejected = Counter(
            "gpufrag_dcgm_rejected_lines_total",
            "Exporter lines refused (and not used), by kind",
            ["endpoint", "kind"],
            registry=registry,
        )
        self.blanks = Counter(
            "gpufrag_dcgm_blank_values_total",
            "Values DCGM reported as blank or not supported, kept as unknown",
            ["endpoint"],
            registry=registry,
        )
        self.reconnects = Counter(
            "gpufrag_dcgm_reconnects_total",
            "Successful scrapes after one or more failed ones",
            ["endpoint"],
            registry=registry,
        )
        self.failing = Gauge(
            "gpufrag_dcgm_consecutive_failures",
            "Failed scrapes in a row (0 while healthy)",
            ["endpoint"],
            registry=registry,
        )
        self.last_success = Gauge(
            "gpufrag_dcgm_last_success_timestamp_seconds",
            "Wall-clock time of the last successful scrape of an exporter (POSIX s)",
            ["endpoint"],
            registry=registry,
        )
        self.discovery_errors = Counter(
            "gpufrag_dcgm_discovery_errors_total",
            "Failed endpoint discoveries (the previous endpoint set is kept)",
            registry=registry,
        )

    def forget(self, endpoint: str) -> None:
        """Drop an endpoint's series once it is gone, so exporter churn (pod IPs change on
        every restart) does not grow the registry without bound."""
        for metric in (self.emitted, self.blanks, self.reconnects, self.failing, self.last_success):
            with suppress(KeyError):
                metric.remove(endpoint)
        for reason in get_args(ErrorReason):
            with suppress(KeyError):
                self.errors.remove(endpoint, reason)
        for kind in get_args(RejectKind):
            with suppress(KeyError):
                self.rejected.remove(endpoint, kind)
