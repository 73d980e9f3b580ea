"""The sink's Prometheus metrics, kept apart so the sink module holds only its write path."""

from __future__ import annotations

import time
from collections.abc import Callable

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
        self.by_table: dict[str, dict[str, int]] = {
            "written": {},
            "dead_lettered": {},
            "insert_errors": {},
        }
        """This sink's own counts, for its summary and tests (a registry may hold others)."""
        self.retried = 0

    def track_buffered(self, read: Callable[[], int]) -> None:
        """The buffered rows gauge reads ``read`` when scraped: a replay buffers rows 81,000
        times, and setting the gauge each time cost as much as buffering them."""
        self.buffered.set_function(read)

    def count_written(self, table: str, count: int) -> None:
        self._add("written", table, count)
        self.written.labels(table=table).inc(count)
        self.last_success.set(time.time())

    def count_dead_lettered(self, table: str) -> None:
        self._add("dead_lettered", table, 1)
        self.dead_lettered.labels(table=table).inc()

    def count_error(self, table: str) -> None:
        self._add("insert_errors", table, 1)
        self.insert_errors.labels(table=table).inc()

    def count_retry(self) -> None:
        self.retried += 1
        self.retries.inc()

    def _add(self, what: str, table: str, count: int) -> None:
        counts = self.by_table[what]
        counts[table] = counts.get(table, 0) + count
