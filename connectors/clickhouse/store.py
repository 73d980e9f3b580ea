"""A small synchronous handle on the history store, the same for chDB and a ClickHouse server.

clickhouse-connect drives both backends through one client API, but chDB has no async client,
so this wrapper is synchronous and the async sink calls it through ``asyncio.to_thread``.

chDB hosts one engine per process and one process per store path: the engine holds an
exclusive ``flock`` on ``<path>/status`` while it is open. Within a process one client per
(path, database) is shared and reference-counted, so several components can "open" the same
store, and the engine is released (another path may then be opened) when the last one closes.
Every failure leaves this module as a :class:`StoreError` with a one-line message.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import tempfile
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import clickhouse_connect

from connectors.clickhouse.dsn import (
    StoreError,
    StoreLocation,
    check_identifier,
    default_store_dsn,
    ensure_store_dir,
    one_line,
    parse_dsn,
)
from connectors.clickhouse.holder import lock_holder
from models.settings import StoreSettings

__all__ = ["QueryResult", "Store", "StoreError", "open_store", "ping_server"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class QueryResult:
    """Column names and rows of a query, as plain Python values (UTC datetimes are aware)."""

    columns: list[str]
    rows: list[tuple[Any, ...]]

    def dicts(self) -> list[dict[str, Any]]:
        """Rows keyed by column name, for comparisons and reports."""
        return [dict(zip(self.columns, row, strict=True)) for row in self.rows]


class _Shared:
    """One client, the lock that serializes calls on it, and how many Stores use it."""

    def __init__(self, client: Any, key: tuple[str, str]) -> None:
        self.client = client
        self.key = key
        self.lock = threading.Lock()
        self.users = 0


_registry_lock = threading.Lock()
_chdb_clients: dict[tuple[str, str], _Shared] = {}


class Store:
    """An open store bound to one database: every statement runs in it.

    Calls are serialized with a lock: the chDB handle cannot interleave calls, and the sink's
    worker threads share one Store."""

    def __init__(self, location: StoreLocation, database: str, shared: _Shared) -> None:
        self.location = location
        self.database = database
        self._shared = shared
        self._closed = False

    def describe(self) -> str:
        """Where this store is, for messages (no password)."""
        return self.location.describe()

    @property
    def closed(self) -> bool:
        return self._closed

    def exclusive(self) -> bool:
        """True when nothing but this Store can be writing the store now, so a run recorded
        as ``running`` there has lost its process.

        A chDB engine holds an exclusive ``flock`` on ``<path>/status`` while it is open (the
        lock every open takes, reads included), so once this process has the engine no other
        live process has the store; and when this Store is the engine's only user here, no
        other part of this process is writing it either. A server store is never exclusive:
        any number of processes on any machine may write it, and nothing here can tell
        whether they are alive."""
        if self._closed or self.location.kind != "chdb":
            return False
        with _registry_lock:
            return self._shared.users == 1

    def command(self, sql: str, parameters: Mapping[str, Any] | None = None) -> None:
        """Run a statement that returns no rows (DDL, OPTIMIZE, DETACH ...)."""
        with self._call(sql) as client:
            client.command(sql, parameters=dict(parameters) if parameters else None)

    def query(
        self,
        sql: str,
        parameters: Mapping[str, Any] | None = None,
        *,
        settings: Mapping[str, str] | None = None,
    ) -> QueryResult:
        """Run a query. Values are bound by the server: write ``{name:Type}`` placeholders in
        ``sql`` and pass ``parameters={"name": value}``; nothing is pasted into the text.
        ``settings`` are ClickHouse settings for this query alone (``readonly`` for a user's
        ad-hoc SQL)."""
        with self._call(sql) as client:
            result = client.query(
                sql,
                parameters=dict(parameters) if parameters else None,
                settings=dict(settings) if settings else None,
            )
            return QueryResult(
                columns=list(result.column_names), rows=[tuple(r) for r in result.result_rows]
            )

    def insert(
        self,
        table: str,
        rows: Sequence[Mapping[str, object]],
        *,
        settings: Mapping[str, object] | None = None,
    ) -> int:
        """Insert rows (dicts with the same keys) into ``table``; returns rows written.

        Columns come from the first row's keys; a row with other keys is refused rather than
        having its extra values dropped. Values go as Python objects: aware datetimes,
        None for Nullable columns and dicts for Map columns are encoded by the driver.
        ``settings`` are ClickHouse settings for this insert alone (the sink's free-space
        reserve)."""
        if not rows:
            return 0
        columns = tuple(rows[0].keys())
        wanted = set(columns)
        data: list[tuple[object, ...]] = []
        for index, row in enumerate(rows):
            if tuple(row.keys()) == columns:
                data.append(tuple(row.values()))
                continue
            if row.keys() != wanted:
                extra = sorted(set(row.keys()) - wanted)
                missing = sorted(wanted - set(row.keys()))
                raise StoreError(
                    f"cannot insert into {table}: row {index} has other columns than the first "
                    f"row (extra {extra}, missing {missing})"
                )
            data.append(tuple(row[c] for c in columns))
        return self.insert_rows(table, columns, data, settings=settings)

    def insert_rows(
        self,
        table: str,
        names: Sequence[str],
        rows: Sequence[Sequence[object]],
        *,
        settings: Mapping[str, object] | None = None,
    ) -> int:
        """Insert rows given as value tuples in the order of ``names``; returns rows written.

        The rows are turned into columns here (one ``zip``) and sent with clickhouse-connect's
        column-oriented insert: no dict and no list per row, which cost 2.3 s of a 5 s insert of
        100,000 event rows. A row of another width is refused, as ``insert`` refuses other keys.
        """
        if not rows:
            return 0
        check_identifier(table, "table")
        data = _columns(table, names, rows)
        with self._call(f"insert into {table}", insert=True) as client:
            client.insert(
                table,
                data,
                column_names=list(names),
                database=self.database,
                settings=dict(settings) if settings else None,
                column_oriented=True,
            )
        return len(rows)

    def close(self) -> None:
        """Release this Store; the client (and chDB's engine) closes with its last user."""
        if self._closed:
            return
        self._closed = True
        _release(self._shared)

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextlib.contextmanager
    def _call(self, what: str, *, insert: bool = False) -> Iterator[Any]:
        if self._closed:
            raise StoreError(f"the store at {self.describe()} is closed")
        with self._shared.lock:
            capture = _capture_serialization_errors() if insert else contextlib.nullcontext(None)
            with capture as captured:
                try:
                    yield self._shared.client
                except StoreError:
                    raise
                except Exception as exc:
                    raise StoreError(_failure_text(what, exc, captured)) from exc


def _columns(
    table: str, names: Sequence[str], rows: Sequence[Sequence[object]]
) -> list[list[object]]:
    """``rows`` as one list per column; a row whose width is not ``len(names)`` is refused."""
    width = len(names)
    if len(rows[0]) == width:
        try:
            return [list(column) for column in zip(*rows, strict=True)]
        except ValueError:
            pass  # some later row is not as wide: named below
    index = next(i for i, row in enumerate(rows) if len(row) != width)
    raise StoreError(
        f"cannot insert into {table}: row {index} has {len(rows[index])} values for {width} columns"
    )


def _failure_text(what: str, exc: BaseException, captured: list[str] | None) -> str:
    """The driver's message, plus what its serializer said about the column when a value
    could not be encoded (otherwise the error may not even name the column)."""
    detail = one_line(str(exc)) or type(exc).__name__
    cause = exc.__cause__
    if cause is not None and str(cause) and str(cause) not in detail:
        detail = f"{detail} ({one_line(str(cause))})"
    if captured:
        detail = f"{captured[-1]}: {detail}"
    if what.startswith("insert into "):
        return f"cannot {what}: {detail}"
    return detail


# clickhouse-connect logs "Error serializing column `x` into data type `T`" with a traceback
# when a value cannot be encoded, then raises an error that may not name the column. Inside
# Store.insert the line is captured into the StoreError (and so into a dead letter's reason)
# instead of being printed.
_capture_local = threading.local()


class _SerializationFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        sink: list[str] | None = getattr(_capture_local, "sink", None)
        if sink is None:
            return True
        message = record.getMessage()
        sink.append(message.replace("Error serializing column", "column", 1))
        return False


logging.getLogger("clickhouse_connect.driver.transform").addFilter(_SerializationFilter())


@contextlib.contextmanager
def _capture_serialization_errors() -> Iterator[list[str]]:
    captured: list[str] = []
    _capture_local.sink = captured
    try:
        yield captured
    finally:
        _capture_local.sink = None


def open_store(settings: StoreSettings) -> Store:
    """Open the store the settings name, create its database if missing, and bind to it.

    Raises StoreError with one line for every way this can fail: a bad DSN, an unusable path,
    a store held by another process, an unreachable server."""
    location = parse_dsn(settings.dsn or default_store_dsn())
    database = check_identifier(location.database or settings.database)
    if location.kind == "chdb":
        return _open_chdb(location, database)
    return _open_server(location, database)


def _open_chdb(location: StoreLocation, database: str) -> Store:
    assert location.path is not None
    key = (os.path.realpath(location.path), database)
    with _registry_lock:
        shared = _chdb_clients.get(key)
        if shared is None:
            # checked only when the engine is not running there yet: while it lays out a new
            # store, the folder holds its first files but no metadata/ (another thread of this
            # process opening the same store then must share it, not be refused)
            path = ensure_store_dir(location)
            client = _connect_chdb(path)
            try:
                _use_database(client, database, location)
            except BaseException:
                client.close()
                raise
            shared = _Shared(client, key)
            _chdb_clients[key] = shared
        shared.users += 1
    return Store(location, database, shared)


def _connect_chdb(path: Path) -> Any:
    failure: Exception | None = None
    with _engine_stderr() as engine_said:
        try:
            client = clickhouse_connect.get_client(dsn=f"chdb://{path}", tz_mode="aware")
        except Exception as exc:
            failure = exc
    if failure is None:
        for text in engine_said:  # not ours to hide when the store opened
            sys.stderr.write(text)
        return client
    raise StoreError(_chdb_open_failure(path, str(failure), engine_said)) from failure


@contextlib.contextmanager
def _engine_stderr() -> Iterator[list[str]]:
    """Collect what the engine writes to file descriptor 2 while it starts.

    When chDB cannot start on a directory (a damaged store, say) the exception only reads
    "Error initializing EmbeddedServer"; the reason is printed by the C++ engine straight to
    stderr. Catching it lets the one-line error carry the reason. The caller gets the text
    and puts it back on stderr when the store opened after all. (File descriptor 2 is the
    process's, so anything another thread prints in these milliseconds is collected too.)"""
    said: list[str] = []
    try:
        saved = os.dup(2)
    except OSError:
        yield said
        return
    with tempfile.TemporaryFile() as capture:
        os.dup2(capture.fileno(), 2)
        try:
            yield said
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            text = capture.read().decode(errors="replace")
            if text.strip():
                said.append(text)


def _chdb_open_failure(path: Path, text: str, engine_said: Sequence[str] = ()) -> str:
    """Tell the three ways chDB refuses a path apart: this process holds another store,
    another process holds this one, or the engine could not start on what is there."""
    if "already initialized with path" in text:
        other = _between(text, "with path '", "'") or "another path"
        return (
            f"cannot open the store at {path}: this process already has the store at {other} "
            "open, and chDB allows one store per process; close it first"
        )
    holder = lock_holder(path)
    if holder is not None:
        return (
            f"the store at {path} is in use by another gpufrag process{holder}; chDB lets one "
            "process open a store, so read it after that one stops, or while it runs through a "
            "ClickHouse server DSN (--store or GPUFRAG_STORE__DSN=http://...)"
        )
    reason = one_line(text.split("Failed to create connection:", 1)[-1])
    for said in engine_said:
        start = said.find("Code: ")
        if start >= 0:
            reason = one_line(said[start:])
            break
    return (
        f"cannot open the store at {path}: {reason}; if the directory is damaged, move it "
        "aside (or point GPUFRAG_STORE__DSN elsewhere)"
    )


def _between(text: str, start: str, end: str) -> str | None:
    _, sep, tail = text.partition(start)
    if not sep:
        return None
    value, sep, _ = tail.partition(end)
    return value if sep else None


def server_client(location: StoreLocation, **options: Any) -> Any:
    """A clickhouse-connect client for a server DSN; ``options`` go to ``get_client``."""
    return clickhouse_connect.get_client(
        host=location.host,
        port=location.port,
        username=location.user,
        password=location.password,
        secure=location.secure,
        tz_mode="aware",
        # Statements are serialized by Store and carry the database, so no server session
        # is needed; a session would also make concurrent calls fail with SESSION_IS_LOCKED.
        autogenerate_session_id=False,
        **options,
    )


def ping_server(location: StoreLocation, *, timeout_s: float) -> None:
    """``SELECT 1`` on a server DSN's server within about ``timeout_s`` (connect, then answer),
    creating nothing: `gpufrag check-config` asks whether the store answers, not to make it.
    Raises StoreError with one line."""
    try:
        client = server_client(location, connect_timeout=timeout_s, send_receive_timeout=timeout_s)
        try:
            client.command("SELECT 1")
        finally:
            client.close()
    except Exception as exc:
        root: BaseException = exc
        while (below := root.__cause__ or root.__context__) is not None:
            root = below  # the driver wraps the socket's error in two layers of retries
        raise StoreError(
            f"cannot reach the store at {location.describe()}: {one_line(str(root), limit=300)}"
        ) from exc


def _open_server(location: StoreLocation, database: str) -> Store:
    try:
        client = server_client(location)
    except Exception as exc:
        raise StoreError(
            f"cannot reach the store at {location.describe()}: {one_line(str(exc))}"
        ) from exc
    try:
        _use_database(client, database, location)
    except BaseException:
        client.close()
        raise
    shared = _Shared(client, ("", database))
    shared.users = 1
    return Store(location, database, shared)


def _use_database(client: Any, database: str, location: StoreLocation) -> None:
    """Create the database if missing and make it the client's default, so migrations and
    queries can name tables without a database prefix (checked to work with chDB too)."""
    try:
        client.command(f"CREATE DATABASE IF NOT EXISTS {database}")
        client.database = database
    except Exception as exc:
        raise StoreError(
            f"cannot use database {database} in the store at {location.describe()}: "
            f"{one_line(str(exc))}"
        ) from exc


def _release(shared: _Shared) -> None:
    with _registry_lock:
        shared.users -= 1
        if shared.users > 0:
            return
        if _chdb_clients.get(shared.key) is shared:
            del _chdb_clients[shared.key]
    with shared.lock:
        try:
            shared.client.close()
        except Exception:  # closing must not turn a clean shutdown into a failure
            log.debug("error closing the store client", exc_info=True)
