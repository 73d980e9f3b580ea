"""A session for a user's own SQL: a client of its own, limits fixed before any statement.

Appending ``SETTINGS readonly = 1`` to a user's text (what the driver does with per-call
settings) guards only the last statement of a multi-statement text, and a query that
reaches the engine at all has already been trusted. So this session:

- parses with ClickHouse's own parser and never executes the user's text: the text is a
  bound String parameter of ``parseQueryToJSON``, which refuses more than one statement
  and returns the syntax tree for the caller to judge;
- runs only ``formatQueryFromJSON`` of a tree the caller accepted, so what runs is the
  engine's own text of what was judged (no quoting or comment trick can differ between the
  check and the run);
- runs it on a client whose limits are set first and ``readonly = 1`` last: the engine then
  refuses every write and every later change of a setting, a query's own ``SETTINGS``
  included.

On chDB the session is a second handle to the store's engine (chDB allows any number of
handles to the one engine a process hosts, each with its own session settings), so the
store's own handle keeps writing. On a server the limits travel with every request, and a
read-only user is the guard to rely on; the parser is then an in-memory chDB engine, since
``parseQueryToJSON`` needs ClickHouse 26.8 (the bundled engine has it, servers may not).
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Mapping
from typing import Any

import clickhouse_connect

from connectors.clickhouse.dsn import StoreError, one_line
from connectors.clickhouse.store import QueryResult, Store, server_client
from models.settings import SqlSettings

__all__ = ["ReadOnlySession", "SqlParseError", "open_read_only"]


class SqlParseError(StoreError):
    """The parser refused the text; ``code`` is ClickHouse's error code (62: syntax)."""

    def __init__(self, message: str, *, code: int) -> None:
        super().__init__(message)
        self.code = code


def session_settings(limits: SqlSettings) -> dict[str, str]:
    """Applied in this order; ``readonly`` last, since after it nothing can be set."""
    return {
        "max_result_rows": str(limits.max_result_rows),
        "result_overflow_mode": "throw",
        "max_execution_time": str(limits.max_execution_time_s),
        "timeout_overflow_mode": "throw",
        "max_memory_usage": str(limits.max_memory_bytes),
        "readonly": "1",
    }


class ReadOnlySession:
    """Parse, format and run read-only statements; one call at a time.

    Parsing, formatting and the lists of tables and functions are gpufrag's own queries:
    they go to the store's handle (or the local parser), so the user's limits, a row limit of
    5 say, apply to the user's statement alone."""

    def __init__(self, store: Store, client: Any, parser: Any | None) -> None:
        self._store = store
        self._client = client
        self._parser = parser
        """A local engine for parsing when the store is a server; None: the store's own."""
        self._lock = threading.Lock()

    @property
    def database(self) -> str:
        """The store's database: the one a query's table names resolve in."""
        return self._store.database

    def parse(self, text: str) -> dict[str, Any]:
        """ClickHouse's syntax tree of ``text`` as JSON; the text itself is never run."""
        try:
            raw = self._ours("SELECT parseQueryToJSON({text:String})", {"text": text})[0][0]
        except StoreError as exc:
            raise SqlParseError(exc.message, code=_error_code(exc.message)) from exc
        tree = json.loads(raw)
        if not isinstance(tree, dict):
            raise SqlParseError(f"the parser returned {type(tree).__name__}", code=0)
        return tree

    def unparse(self, tree: Mapping[str, Any]) -> str:
        """The SQL text of a tree, as ClickHouse's formatter writes it."""
        sql = "SELECT formatQueryFromJSON({tree:String})"
        return str(self._ours(sql, {"tree": json.dumps(tree)})[0][0])

    def functions(self) -> list[tuple[str, str, str, bool, bool]]:
        """(name, alias_to, categories, case_insensitive, is_aggregate) of every function the
        parser's engine knows."""
        rows = self._ours(
            "SELECT name, alias_to, categories, case_insensitive, is_aggregate "
            "FROM system.functions",
            {},
        )
        return [(str(n), str(a), str(c), bool(ci), bool(ag)) for n, a, c, ci, ag in rows]

    def combinators(self) -> list[str]:
        """The aggregate function combinators' suffixes (``If``, ``Array``, ``State``...)."""
        rows = self._ours("SELECT name FROM system.aggregate_function_combinators", {})
        return [str(r[0]) for r in rows]

    def database_engine(self) -> str:
        """The engine of the store's database: ``Atomic`` for a store gpufrag made."""
        rows = self._store.query(
            "SELECT engine FROM system.databases WHERE name = currentDatabase()"
        ).rows
        return str(rows[0][0]) if rows else ""

    def tables(self) -> set[str]:
        """The tables and views of the store's database: the only ones a query may read."""
        res = self._store.query("SELECT name FROM system.tables WHERE database = currentDatabase()")
        return {str(r[0]) for r in res.rows}

    def query(self, sql: str, parameters: Mapping[str, str]) -> QueryResult:
        """Rows of an accepted statement; column names even when there are no rows (the
        driver reads none from an empty result, so a ``LIMIT 0`` probe asks for them)."""
        with self._lock:
            try:
                result = self._client.query(sql, parameters=dict(parameters) or None)
                columns = list(result.column_names)
                rows = [tuple(r) for r in result.result_rows]
                if not columns:
                    probe = self._client.query(
                        f"SELECT * FROM ({sql}) LIMIT 0", parameters=dict(parameters) or None
                    )
                    columns = list(probe.column_names)
            except Exception as exc:
                raise StoreError(one_line(str(exc))) from exc
        return QueryResult(columns=columns, rows=rows)

    def close(self) -> None:
        with self._lock:
            _close(self._client, self._parser)

    def __enter__(self) -> ReadOnlySession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _ours(self, sql: str, parameters: Mapping[str, str]) -> list[tuple[Any, ...]]:
        if self._parser is None:
            return self._store.query(sql, parameters).rows
        with self._lock:
            try:
                result = self._parser.query(sql, parameters=dict(parameters) or None)
            except Exception as exc:
                raise StoreError(one_line(str(exc))) from exc
            return [tuple(r) for r in result.result_rows]


def open_read_only(store: Store, limits: SqlSettings) -> ReadOnlySession:
    """A session beside ``store`` (which must stay open while it is used)."""
    opened: list[Any] = []
    try:
        client = _client(store, session_settings(limits))
        opened.append(client)
        parser = None
        if store.location.kind != "chdb":
            parser = clickhouse_connect.get_client(dsn="chdb://:memory:")
            opened.append(parser)
        return ReadOnlySession(store, client, parser)
    except Exception as exc:
        _close(*opened)
        raise StoreError(
            f"cannot open a read-only session on {store.describe()}: {one_line(str(exc))}"
        ) from exc


def _client(store: Store, settings: Mapping[str, str]) -> Any:
    location = store.location
    if location.kind == "chdb":
        path = os.path.realpath(str(location.path))
        client = clickhouse_connect.get_client(dsn=f"chdb://{path}", tz_mode="aware")
        try:
            client.database = store.database
            for name, value in settings.items():  # readonly last: see session_settings
                client.command(f"SET {name} = '{value}'")
        except BaseException:
            client.close()
            raise
        return client
    return server_client(location, database=store.database, settings=dict(settings))


def _close(*clients: Any) -> None:
    for client in clients:
        if client is None:
            continue
        with contextlib.suppress(Exception):  # closing must not turn a stop into a failure
            client.close()


def _error_code(message: str) -> int:
    _, sep, tail = message.partition("Code: ")
    digits = "".join(c for c in tail[:6] if c.isdigit()) if sep else ""
    return int(digits) if digits else 0
