"""The history sink's read-only views, for tests, summaries and status pages, kept apart so
the sink module holds only its write path."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from connectors.clickhouse.disk_full import StoreFullError
from connectors.clickhouse.sink_buffer import Outages, TableBuffer
from connectors.clickhouse.sink_metrics import SinkMetrics

__all__ = ["SinkViews", "State"]

State = Literal["new", "running", "stopping", "stopped"]


class SinkViews:
    """What ``ClickHouseSink`` shows of its state; the sink sets every attribute below."""

    _buffered: int
    _buffers: dict[str, TableBuffer]
    _metrics: SinkMetrics
    _spool_dir: Path | None
    _spooled: Path | None
    _spooled_rows: int
    _fatal: StoreFullError | None
    _state: State
    _outages: Outages

    @property
    def buffered_rows(self) -> int:
        """Rows accepted by write() and not yet stored or dead-lettered."""
        return self._buffered

    def buffered_for(self, table: str) -> int:
        buffer = self._buffers.get(table)
        return buffer.count if buffer else 0

    @property
    def written_rows(self) -> dict[str, int]:
        """Rows stored per table by this sink (a retried batch counts again)."""
        return dict(self._metrics.by_table["written"])

    @property
    def dead_lettered_rows(self) -> dict[str, int]:
        """Rows sent to the dead_letter table, per table they were meant for."""
        return dict(self._metrics.by_table["dead_lettered"])

    @property
    def insert_errors(self) -> dict[str, int]:
        return dict(self._metrics.by_table["insert_errors"])

    @property
    def retries(self) -> int:
        return self._metrics.retried

    @property
    def spool_dir(self) -> Path | None:
        """Where rows are spooled at stop (known once started)."""
        return self._spool_dir

    @property
    def spooled_file(self) -> Path | None:
        """The file stop() wrote its unwritten rows to, if it had to."""
        return self._spooled

    @property
    def spooled_rows(self) -> int:
        """Rows stop() kept in ``spooled_file``."""
        return self._spooled_rows

    @property
    def fatal(self) -> StoreFullError | None:
        """Why the sink stopped taking rows by itself (the store's disk is full), if it did."""
        return self._fatal

    @property
    def running(self) -> bool:
        return self._state == "running"

    @property
    def writable(self) -> bool:
        """Running, with no table's writes being retried and the disk not full: a readiness
        probe's answer for the store."""
        return self.running and self._fatal is None and not self._outages.count

    async def wait_for_outage(self) -> None:
        """Return once some table's writes are being retried after a store-side failure."""
        await self._outages.any.wait()
