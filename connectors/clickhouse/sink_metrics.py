"""The sink's Prometheus metrics, kept apart so the sink module holds only its write path."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

__all__ = ["SinkMetrics"]


class SinkMetrics:
    """Registered per sink on the registry it is given, so tests can read one sink's numbers
    without the process-wide registry mixing in others."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.written = Counter(
            "gpufrag_sink_rows_written_total",
            "Rows stored in the history store, by table.",
            ["table"],
            registry=registry,
        )
        self.dead_lettered = Counter(
            "gpufrag_sink_rows_dead_lettered_total",
            "Rows that could not be written and went to the dead_letter table, by table.",
            ["table"],
            registry=registry,
        )
        self.insert_errors = Counter(
            "gpufrag_sink_insert_errors_total",
            "Failed insert attempts, by table.",
            ["table"],
            registry=registry,
        )
        self.retries = Counter(
            "gpufrag_sink_retries_total",
            "Inserts retried after a backoff wait.",
            registry=registry,
        )
        self.buffered = Gauge(
            "gpufrag_sink_buffered_rows",
            "Rows held in memory, not yet stored or dead-lettered.",
            registry=registry,
        )
        self.last_success = Gauge(
            "gpufrag_sink_last_success_timestamp_seconds",
            "Unix time of the last successful insert.",
            registry=registry,
        )
