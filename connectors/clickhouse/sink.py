"""The history sink: buffered, batched, retried writes to the store that never drop a row.

Each table has its own buffer and background writer, so an outage of one table (or a slow
one) does not hold the others back. A row leaves its buffer only once it is stored or
dead-lettered; until then it counts towards ``max_buffered_rows`` (writers wait beyond it) and
is what ``stop`` spools to disk when the store does not come back in time.

When an insert fails the sink asks whether the store or the rows are at fault, by probing the
table with a query that needs the table but no rows:

- the disk holding the store is full (``disk_full``): it does not empty by itself, so the
  sink stops (``write`` raises ``StoreFullError``) and ``stop`` spools what it holds. Inserts
  leave ``keep_free_mib`` free, so the caller can still mark its run failed;
- the probe fails, or the error is one ClickHouse raises for the store's state rather than
  the data (read-only, too many parts, overload, timeouts): an outage. The rows stay
  buffered and the insert is retried with exponential backoff and jitter until it succeeds
  (``wait_for_outage`` lets a stopping command decide not to wait);
- the probe succeeds: some rows cannot be written. The batch is split in halves and each half
  retried, down to single rows; a row that still fails ``row_attempts`` times goes to the
  ``dead_letter`` table with the error as its reason. If even that insert fails, the store
  cannot take writes after all and the row is retried as in an outage.

Writes are idempotent without ids invented here: rows are pure functions of the messages and
every table is a ReplacingMergeTree keyed on them, so a batch written twice (a retry after a
reply was lost, or spooled rows re-sent after a stop that timed out mid-insert) collapses to
one row per key. The dead letter's id is a hash of the table and the row for the same reason.

The dead letters and the store-or-rows test live in ``dead_letter`` (re-exported here, where
callers import them from), the buffers in ``sink_buffer`` and the metrics in ``sink_metrics``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from prometheus_client import CollectorRegistry

from connectors.clickhouse.dead_letter import (
    DEAD_LETTER_TABLE,
    dead_letter_row,
    is_store_side_error,
)
from connectors.clickhouse.disk_full import (
    StoreFullError,
    disk_full_error,
    is_disk_full,
    spool_floor,
)
from connectors.clickhouse.dsn import StoreError, check_identifier, default_spool_dir
from connectors.clickhouse.sink_buffer import (
    Block,
    Outage,
    Outages,
    TableBuffer,
    Values,
    blocks_of,
)
from connectors.clickhouse.sink_metrics import SinkMetrics
from connectors.clickhouse.sink_views import SinkViews, State
from connectors.clickhouse.spool import reload_spool, spool_rows
from connectors.clickhouse.store import Store
from models.settings import StoreSettings

__all__ = ["DEAD_LETTER_TABLE", "ClickHouseSink", "dead_letter_row", "is_store_side_error"]

log = logging.getLogger(__name__)


class ClickHouseSink(SinkViews):
    """Async service writing row dicts to store tables; see the module docstring."""

    def __init__(
        self,
        store_factory: Callable[[], Store],
        settings: StoreSettings,
        *,
        registry: CollectorRegistry | None = None,
        run_id: str = "",
    ) -> None:
        """``run_id``: the run the dead letters it keeps are filed under, unless the refused
        row names its own."""
        self.run_id = run_id
        self._store_factory = store_factory
        self._settings = settings
        self._metrics = SinkMetrics(registry if registry is not None else CollectorRegistry())
        self._store: Store | None = None
        self._spool_dir: Path | None = None
        self._state: State = "new"
        self._buffers: dict[str, TableBuffer] = {}
        self._tables: set[str] = set()
        """Table names already checked (a replay writes 47,000 times to seven tables)."""
        self._buffered = 0
        self._metrics.track_buffered(lambda: self._buffered)
        self._limit = settings.max_buffered_rows
        self._cap = settings.batch_rows
        self._space = asyncio.Condition()
        self._origins: dict[Path, int] = {}
        self._spooled: Path | None = None
        self._spooled_rows = 0
        self._fatal: StoreFullError | None = None
        self._outages = Outages()
        self._flushing: asyncio.Future[None] | None = None
        self._hurried = False
        self._stopped = asyncio.Event()
        reserve = settings.keep_free_mib * 2**20  # none at 0, for servers without the setting
        self._insert_settings = {"min_free_disk_bytes_to_perform_insert": reserve}
        if not reserve:
            self._insert_settings.clear()

    # -- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        """Open the store and reload rows a previous sink spooled; they are written like any
        other buffered rows, and each spool file is removed once all its rows are out."""
        if self._state != "new":
            raise RuntimeError(f"start() on a sink that is {self._state}")
        store = await asyncio.to_thread(self._store_factory)
        self._store = store
        configured = self._settings.spool_dir
        self._spool_dir = (
            Path(configured).expanduser() if configured else default_spool_dir(store.location)
        )
        files = await asyncio.to_thread(reload_spool, self._spool_dir)
        self._state = "running"
        for spool in files:
            self._origins[spool.path] = len(spool.rows)
            for table, row in spool.rows:
                self._append(table, tuple(row), [tuple(row.values())], origin=spool.path)
            log.info("re-sending %d spooled rows from %s", len(spool.rows), spool.path)

    async def write(self, table: str, rows: Sequence[Mapping[str, object]]) -> None:
        """Buffer rows for ``table``. Waits while ``max_buffered_rows`` are buffered (the store
        is down or slower than the writers), so memory stays bounded and nothing is dropped."""
        self._check_table(table)
        if table == DEAD_LETTER_TABLE and self.run_id:
            rows = [r if r.get("run_id") else {**r, "run_id": self.run_id} for r in rows]
        for names, values in blocks_of(rows):
            await self._put(table, names, values)

    async def write_rows(self, table: str, names: tuple[str, ...], rows: Sequence[Values]) -> None:
        """``write`` for rows given as value tuples in the order of ``names`` (``row_values``):
        buffered as they are, and sent as columns."""
        self._check_table(table)
        if self._buffered + len(rows) <= self._limit:  # room for all (the usual case)
            self._append(table, names, rows)
        else:
            await self._put(table, names, rows)

    async def flush(self) -> None:
        """Write every row buffered when called; while the store is down this keeps retrying,
        so bound it with asyncio.wait_for (or use stop(timeout_s=...)) if it must end."""
        if self._store is None:
            return
        await asyncio.gather(
            *(self._flush_table(table, buffer) for table, buffer in list(self._buffers.items()))
        )

    async def stop(self, *, timeout_s: float | None = None) -> None:
        """Flush, then close the store. If the rows cannot all be written within ``timeout_s``
        (None waits as long as it takes), the rest are spooled to disk for the next sink."""
        if self._state == "new":
            self._state = "stopped"
            self._stopped.set()
            return
        if self._state in ("stopping", "stopped"):
            await self._stopped.wait()
            return
        self._state = "stopping"
        async with self._space:
            self._space.notify_all()
        cancelled = False
        try:
            if self._fatal is None:  # a full disk takes no more rows; they go to the spool
                self._flushing = asyncio.ensure_future(asyncio.wait_for(self.flush(), timeout_s))
                await self._flushing
        except StoreFullError:
            pass  # found while flushing: the rows left are spooled, the caller says so
        except TimeoutError:
            log.warning(
                "the store did not take all rows within %.1fs; spooling %d rows",
                timeout_s,
                self._buffered,
            )
        except asyncio.CancelledError:
            # Ctrl-C while stopping (asyncio.run cancels the main task): the buffered rows are
            # still spooled before the cancellation goes on. hurry() only ends the flush.
            task = asyncio.current_task()
            cancelled = not self._hurried or (task is not None and task.cancelling() > 0)
        except Exception:
            log.exception("flush at stop failed; spooling the remaining rows")
        try:
            await self._cancel_writers()
            await self._spool_remaining()
        finally:
            store, self._store = self._store, None
            self._state = "stopped"
            self._stopped.set()
            if store is not None:
                await asyncio.to_thread(store.close)
        if cancelled:
            raise asyncio.CancelledError

    def hurry(self) -> None:
        """Stop waiting for the store: a stop() flushing now, or a later one, spools at once
        what is left (SIGTERM while the store is not taking rows)."""
        self._hurried = True
        if self._flushing is not None:
            self._flushing.cancel()

    # -- buffering ----------------------------------------------------------------------------

    def _check_table(self, table: str) -> None:
        if table not in self._tables:
            try:
                check_identifier(table, "table")
            except StoreError as exc:
                raise ValueError(exc.message) from None
            self._tables.add(table)
        self._check_running()

    async def _put(self, table: str, names: tuple[str, ...], rows: Sequence[Values]) -> None:
        limit = self._limit
        if self._buffered + len(rows) <= limit:  # room for all (the usual case): no wait
            self._append(table, names, rows)
            return
        pending = rows
        while pending:
            async with self._space:
                self._check_running()
                await self._space.wait_for(
                    lambda: (
                        self._buffered < limit
                        or self._state != "running"
                        or self._fatal is not None
                    )
                )
                self._check_running()
                room = limit - self._buffered
                take, pending = pending[:room], pending[room:]
                self._append(table, names, take)

    def _check_running(self) -> None:
        if self._fatal is not None:
            raise self._fatal
        if self._state != "running":
            raise RuntimeError(
                "the sink is not running: start() it first"
                if self._state == "new"
                else f"the sink is {self._state}; rows are no longer accepted"
            )

    def _append(
        self,
        table: str,
        names: tuple[str, ...],
        rows: Sequence[Values],
        origin: Path | None = None,
    ) -> None:
        if not rows:
            return
        buffer = self._buffers.get(table)
        if buffer is None:
            buffer = self._buffers[table] = TableBuffer()
            buffer.task = asyncio.create_task(
                self._background(table, buffer), name=f"clickhouse-sink:{table}"
            )
        buffer.add(names, rows, cap=self._cap, origin=origin)
        self._buffered += len(rows)
        buffer.wake.set()
        if self._buffered >= self._limit:
            # Writers now wait for room, and every table's writer must make it: rows spread
            # over several tables can each stay below batch_rows, and waiting for the flush
            # interval then stored max_buffered_rows per interval (10 rows a second: a stall).
            for other in self._buffers.values():
                other.wake.set()

    def _full(self) -> bool:
        return self._buffered >= self._limit

    async def _release(self, block: Block) -> None:
        self._buffered -= len(block.rows)
        origin = block.origin
        if origin is not None:
            left = self._origins.get(origin, 0) - len(block.rows)
            if left > 0:
                self._origins[origin] = left
            else:
                self._origins.pop(origin, None)
                await asyncio.to_thread(origin.unlink, missing_ok=True)
                log.info("spooled rows of %s are all written; removed it", origin)
        async with self._space:
            self._space.notify_all()

    async def _background(self, table: str, buffer: TableBuffer) -> None:
        """Write the head batch when it is full, when its oldest row has waited
        flush_interval_s, or at once while the sink is full and writers wait for room."""
        batch_rows = self._settings.batch_rows
        interval = self._settings.flush_interval_s
        while True:
            buffer.wake.clear()
            if not buffer.blocks:
                await buffer.wake.wait()
                continue
            wait = buffer.blocks[0].arrived + interval - time.monotonic()
            if buffer.count < batch_rows and wait > 0 and not self._full():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(buffer.wake.wait(), wait)
                continue
            try:
                await self._write_head(table, buffer)
            except StoreFullError:
                return  # the rows stay buffered for stop() to spool
            except Exception:  # a bug must not kill the writer: the rows stay buffered
                log.exception("writing %s failed unexpectedly; retrying", table)
                await asyncio.sleep(self._settings.retry_max_s)

    async def _flush_table(self, table: str, buffer: TableBuffer) -> None:
        target = buffer.appended
        while buffer.done < target and buffer.blocks:
            if self._fatal is not None:
                raise self._fatal
            await self._write_head(table, buffer)

    async def _write_head(self, table: str, buffer: TableBuffer) -> None:
        async with buffer.lock:
            head = buffer.take_head()
            if head is None:
                return
            await self._deliver(table, head.names, head.rows)
            buffer.drop_head(head)
            await self._release(head)

    async def _cancel_writers(self) -> None:
        tasks = [b.task for b in self._buffers.values() if b.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _spool_remaining(self) -> None:
        rows = [
            (table, row)
            for table, buffer in self._buffers.items()
            for block in buffer.blocks
            for row in block.dicts()
        ]
        if rows:
            assert self._spool_dir is not None
            await self._spool(self._spool_dir, rows)
        # Rows reloaded from older spool files are now either stored or in the new file, unless
        # a full disk cut it short: then the older files stay (a row in two collapses on its key).
        for origin in list(self._origins) if self._spooled_rows == len(rows) else []:
            await asyncio.to_thread(origin.unlink, missing_ok=True)
        self._origins.clear()

    async def _spool(self, directory: Path, rows: list[tuple[str, dict[str, object]]]) -> None:
        """Keep ``rows`` in a spool file, on a full disk as many as fit (see spool_floor); the
        fatal error (or a log line) says what was kept."""
        keep = self._settings.keep_free_mib
        floor = spool_floor(directory, self._open_store.location, keep_free_mib=keep)
        path, kept, said = await asyncio.to_thread(spool_rows, directory, rows, floor_bytes=floor)
        self._spooled, self._spooled_rows = path, kept
        if self._fatal is not None:
            self._fatal.add(said)
        else:
            log.log(logging.WARNING if kept == len(rows) else logging.ERROR, "%s", said)

    # -- delivery -----------------------------------------------------------------------------

    @property
    def _open_store(self) -> Store:
        if self._store is None:
            raise RuntimeError("the sink has no open store")
        return self._store

    async def _deliver(self, table: str, names: tuple[str, ...], rows: list[Values]) -> None:
        """Return once every row is stored or dead-lettered; see the module docstring."""
        outage = Outage(self._outages)
        try:
            await self._deliver_retrying(table, names, rows, outage)
        finally:
            outage.end()

    async def _deliver_retrying(
        self, table: str, names: tuple[str, ...], rows: list[Values], outage: Outage
    ) -> None:
        delay = self._settings.retry_initial_s
        row_failures = 0
        while True:
            if self._fatal is not None:
                raise self._fatal
            try:
                await asyncio.to_thread(self._insert, table, names, rows)
            except Exception as exc:
                self._metrics.count_error(table)
                reason = str(exc) or type(exc).__name__
                if is_disk_full(reason):
                    raise await self._fail(reason) from None
                if is_store_side_error(reason) or not await self._healthy(table):
                    if outage.begin():
                        log.warning("store outage writing %s, retrying: %s", table, reason)
                elif len(rows) > 1:
                    half = len(rows) // 2
                    await self._deliver(table, names, rows[:half])
                    await self._deliver(table, names, rows[half:])
                    return
                else:
                    row_failures += 1
                    if row_failures >= self._settings.row_attempts:
                        row = dict(zip(names, rows[0], strict=True))
                        problem = await self._dead_letter(table, row, reason)
                        if problem is None:
                            return
                        # Not even a dead letter could be written: the store is at fault.
                        if outage.begin():
                            log.warning(
                                "cannot write a dead letter for a %s row (%s); treating it as "
                                "a store outage and retrying the row",
                                table,
                                problem,
                            )
                        row_failures = 0
                await self._backoff(delay)
                delay = min(delay * 2, self._settings.retry_max_s)
                continue
            self._metrics.count_written(table, len(rows))
            if outage.on:
                log.info("store is back: wrote %d rows to %s", len(rows), table)
            return

    def _insert(self, table: str, names: tuple[str, ...], rows: list[Values]) -> None:
        self._open_store.insert_rows(table, names, rows, settings=self._insert_settings)

    async def _fail(self, reason: str) -> StoreFullError:
        """The disk is full: stop taking rows and wake every writer waiting for room."""
        if self._fatal is None:
            self._fatal = disk_full_error(
                self._open_store.location, reason, keep_free_mib=self._settings.keep_free_mib
            )
            async with self._space:
                self._space.notify_all()
        return self._fatal

    async def _healthy(self, table: str) -> bool:
        """Does the store answer a query that needs ``table`` (and no rows)?"""
        try:
            await asyncio.to_thread(self._open_store.query, f"SELECT 1 FROM {table} LIMIT 0")
        except Exception:
            return False
        return True

    async def _dead_letter(
        self, table: str, row: dict[str, object], reason: str
    ) -> Exception | None:
        """Write the row's dead letter; returns why that failed, or None once it is stored."""
        letter = dead_letter_row(table, row, reason, run_id=self.run_id)
        try:
            names = tuple(letter)
            await asyncio.to_thread(
                self._insert, DEAD_LETTER_TABLE, names, [tuple(letter.values())]
            )
        except Exception as exc:
            self._metrics.count_error(DEAD_LETTER_TABLE)
            return exc
        self._metrics.count_dead_lettered(table)
        log.warning("dead-lettered a %s row: %s", table, reason)
        return None

    async def _backoff(self, delay: float) -> None:
        self._metrics.count_retry()
        # Jitter spreads the retries of many writers (and tables) after an outage.
        await asyncio.sleep(delay * (0.5 + random.random() / 2))
