"""`gpufrag sql --query` and `--schema`: a user's own SQL over the history store, read-only.

Read-only by the engine, not by the text: the query is parsed by ClickHouse's own parser
(never run as given), its tree judged (:mod:`streams.app.queries.query_tree`: one SELECT over the
store's tables, no table function, no file or network function, no output or SETTINGS
clause), and only ClickHouse's own rendering of the accepted tree runs, in a session whose
limits and ``readonly = 1`` were fixed before it (:mod:`connectors.clickhouse.read_only`).
``--param`` values are bound by ClickHouse as ``{name:Type}`` placeholders: never pasted into
the SQL.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Set

from connectors.clickhouse.dsn import StoreError
from connectors.clickhouse.read_only import ReadOnlySession, SqlParseError
from connectors.clickhouse.store import QueryResult, Store
from models.settings import SqlSettings
from streams.app.queries.named_queries import QueryError
from streams.app.queries.query_functions import FunctionCatalogue, FunctionRow
from streams.app.queries.query_tree import (
    Allowed,
    judge,
    parameter_names,
    statement_word,
)

BAD_ARGUMENTS = 36
"""What ``parseQueryToJSON`` answers for a statement it can parse but has no JSON form for
(INSERT ... VALUES with its data, DESCRIBE, SHOW): not a SELECT either way."""
_NODE_KIND = re.compile(r"AST node of type '(\w+)'")

LIMIT_ERRORS: Mapping[str, str] = {
    "TOO_MANY_ROWS_OR_BYTES": "it returns more than {rows} rows (GPUFRAG_SQL__MAX_RESULT_ROWS); "
    "add a LIMIT or an aggregate",
    "TIMEOUT_EXCEEDED": "it ran past {seconds} s (GPUFRAG_SQL__MAX_EXECUTION_TIME_S)",
    "MEMORY_LIMIT_EXCEEDED": "it needed more than {memory} bytes of memory "
    "(GPUFRAG_SQL__MAX_MEMORY_BYTES)",
}
"""ClickHouse's names for the session's limits, and how each is told to the user."""

TABLE_NOTES: Mapping[str, str] = {
    "runs": "one row per replay or live session and its outcome; later rows for a run_id win "
    "(read with FINAL)",
    "events": "raw input events as they crossed the bus, kept 30 days after they were written",
    "gpu_samples": "GPU telemetry, one row per card and sample: memory, utilization, XIDs, "
    "health and MIG identity (NULL: not reported by the source)",
    "node_profiles": "a node profile snapshot on every change (removed = 1 when the node left)",
    "task_profiles": "a task (pod) profile snapshot on every change (removed = 1 when the pod "
    "was deleted)",
    "task_memory_peaks": "a pod's GPU memory peak each time it rose, from its node's samples in "
    "event-time order",
    "signals": "signals as they opened and resolved: one row per (fingerprint, opened_at, state)",
    "actions": "proposed or executed actions with their audit evidence",
    "pending_explanations": "why pending pods could not run, each time the pending queue was "
    "evaluated, beside kube-scheduler's own verdict, with the queue holding each (quota_*)",
    "cluster_frag": "the cluster's fragmentation after each evaluation",
    "cluster_frag_1m": "per-minute rollup of cluster_frag (a plain view over the deduplicated "
    "table)",
    "dead_letter": "rows that could never be written, with the reason: nothing is dropped silently",
    "run_writers": "the processes storing a run (several sinks): each beats while it stores, so "
    "the last to stop ends the run",
    "schema_migrations": "the numbered migrations (sql/migrations) applied to this store",
}
"""One line per table on what it holds, from the comments in ``sql/migrations/*.sql``."""


def run_adhoc(
    session: ReadOnlySession, text: str, given: Mapping[str, str], *, limits: SqlSettings
) -> QueryResult:
    """Parse, judge and run a user's ``--query`` with its ``--param`` values.

    Every refusal is a one-line :class:`QueryError`; an engine error while it runs (a
    missing column, a limit reached) is a one-line :class:`StoreError`."""
    if not text.strip():
        raise QueryError("--query is empty: give one SELECT (or WITH ... SELECT) statement")
    tree = _parsed(session, text)
    _check_database(session)
    catalogue = FunctionCatalogue.of(
        [FunctionRow(*row) for row in session.functions()], session.combinators()
    )
    judge(
        tree,
        Allowed(tables=session.tables(), database=session.database, functions=catalogue),
    )
    params = bound_params(parameter_names(tree), given)
    try:
        sql = session.unparse(tree)
    except StoreError as exc:  # the tree has no text form (a literal past UInt64, say)
        raise QueryError(f"--query cannot be run as parsed: {_engine_words(exc.message)}") from exc
    try:
        return session.query(sql, params)
    except StoreError as exc:
        raise StoreError(_run_failure(exc.message, limits)) from exc


def bound_params(used: Set[str], given: Mapping[str, str]) -> dict[str, str]:
    """The ``--param`` values, each checked to have a ``{name:Type}`` placeholder in the
    query (ClickHouse converts and checks the value against that type), and every
    placeholder a value."""
    for name in given:
        if name not in used:
            raise QueryError(
                f"--param {name} is not used by the query: write {{{name}:Type}} where its "
                "value goes (values are bound by ClickHouse, never pasted into the SQL)"
            )
    missing = sorted(set(used) - set(given))
    if missing:
        raise QueryError(f"the query's {{{missing[0]}:...}} needs --param {missing[0]}=<value>")
    return dict(given)


def schema(store: Store) -> list[dict[str, object]]:
    """Every table and view of the store's database: name, engine, what it holds, columns."""
    tables = store.query(
        "SELECT name, engine FROM system.tables WHERE database = currentDatabase() ORDER BY name"
    )
    columns = store.query(
        "SELECT table, name, type FROM system.columns WHERE database = currentDatabase() "
        "ORDER BY table, position"
    )
    out: list[dict[str, object]] = []
    for name, engine in tables.rows:
        out.append(
            {
                "table": name,
                "engine": engine,
                "about": TABLE_NOTES.get(name, "(no description)"),
                "columns": [{"name": c, "type": t} for tbl, c, t in columns.rows if tbl == name],
            }
        )
    return out


def schema_lines(tables: list[dict[str, object]]) -> list[str]:
    """The schema as text: a line per table on what it holds, then its columns indented."""
    lines: list[str] = []
    for t in tables:
        lines.append(f"{t['table']} ({t['engine']}): {t['about']}")
        cols = t["columns"]
        assert isinstance(cols, list)
        width = max((len(str(c["name"])) for c in cols), default=0)
        lines += [f"    {str(c['name']).ljust(width)}  {c['type']}" for c in cols]
    return lines


def _parsed(session: ReadOnlySession, text: str) -> dict[str, object]:
    try:
        return session.parse(text)
    except SqlParseError as exc:
        if "Multi-statements are not allowed" in exc.message:
            raise QueryError(
                "--query refused: it holds more than one statement; gpufrag sql runs one "
                "SELECT at a time"
            ) from exc
        if "Empty query" in exc.message:
            raise QueryError(
                "--query is empty: give one SELECT (or WITH ... SELECT) statement"
            ) from exc
        if exc.code != BAD_ARGUMENTS:
            raise QueryError(f"--query cannot be parsed: {_engine_words(exc.message)}") from exc
        kind = _NODE_KIND.search(exc.message)
        word = statement_word(kind.group(1)) if kind else None
        if word is None and "INSERT" in exc.message:
            word = statement_word("InsertQuery")
        if word is not None:
            raise QueryError(
                f"--query refused: gpufrag sql runs one SELECT (or WITH ... SELECT), not {word}"
            ) from exc
        raise QueryError(
            "--query refused: gpufrag sql runs one SELECT (or WITH ... SELECT), and ClickHouse "
            f"reads this as something else ({_engine_words(exc.message)})"
        ) from exc


STORE_DATABASE_ENGINES = frozenset({"Atomic", "Replicated", "Ordinary"})
"""Engines whose tables are the ones they list; chDB's ``default`` database is an Overlay that
also reads files by name (``FROM `/etc/hostname```), so a store there is not queried."""


def _check_database(session: ReadOnlySession) -> None:
    engine = session.database_engine()
    if engine not in STORE_DATABASE_ENGINES:
        raise QueryError(
            f"--query refused: the store's database {session.database} has the engine "
            f"{engine or '(none)'}, whose table names can reach past the store (use a database "
            "gpufrag made, as GPUFRAG_STORE__DATABASE=gpufrag, the default, does)"
        )


def _run_failure(message: str, limits: SqlSettings) -> str:
    for name, words in LIMIT_ERRORS.items():
        if f"({name})" in message:
            told = words.format(
                rows=f"{limits.max_result_rows:,}",
                seconds=f"{limits.max_execution_time_s:g}",
                memory=f"{limits.max_memory_bytes:,}",
            )
            return f"--query stopped: {told}"
    if "(READONLY)" in message:
        return f"--query refused by ClickHouse's readonly setting: {_engine_words(message)}"
    return f"--query failed: {_engine_words(message)}"


def _engine_words(message: str) -> str:
    """The engine's own sentence, without its code prefix and the echo of the whole query
    (which can be long, and is the user's own text anyway)."""
    text = message.split("DB::Exception: ", 1)[-1]
    for cut in (": In scope ", ". (", " (version "):
        at = text.find(cut)
        if at > 0:
            text = text[:at]
    return text if len(text) <= 300 else text[:297] + "..."
