"""`gpufrag sql --query` and `--schema`: a user's own SQL over the history store, read-only.

Two guards, so that neither alone has to be perfect. The text is checked here first: one
statement, and it must start with SELECT, WITH, SHOW or DESCRIBE (DESC), which refuses the
obvious mistakes with one line before the store is even opened. Then the statement runs with
ClickHouse's ``readonly = 1`` setting for that query, which is what actually stops a write the
check let through (the engine refuses INSERT, CREATE, DROP, ALTER, SYSTEM and table functions
such as ``file()`` and ``url()`` then, and refuses a query that tries to set ``readonly`` back).
``--param`` values are bound by ClickHouse as ``{name:Type}`` placeholders: never pasted into
the SQL.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from connectors.clickhouse.dsn import StoreError
from connectors.clickhouse.store import QueryResult, Store
from streams.app.named_queries import QueryError

READ_ONLY_SETTINGS: Mapping[str, str] = {"readonly": "1"}
"""1, not 2: with chDB 4.4 ``readonly = 2`` (which allows changing settings) still lets
``SELECT * FROM file(...)`` read any file and ``INSERT INTO FUNCTION file(...)`` write one, and
1 refuses both (both measured)."""

ALLOWED = ("SELECT", "WITH", "SHOW", "DESCRIBE", "DESC")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PLACEHOLDER = re.compile(r"\{(\w+):([^}]+)\}")
"""clickhouse-connect's server-side placeholder: with none in the text it would format the
values into the SQL on the client, so every ``--param`` must have one."""

TABLE_NOTES: Mapping[str, str] = {
    "runs": "one row per replay or live session and its outcome; later rows for a run_id win "
    "(read with FINAL)",
    "events": "raw input events as they crossed the bus, kept 30 days after they were written",
    "gpu_samples": "GPU telemetry, one row per card and sample: memory, utilization, XIDs, "
    "health and MIG identity (NULL: not reported by the source)",
    "node_profiles": "a node profile snapshot on every change (removed = 1 when the node left)",
    "task_profiles": "a task (pod) profile snapshot on every change (removed = 1 when the pod "
    "was deleted)",
    "signals": "signals as they opened and resolved: one row per (fingerprint, opened_at, state)",
    "actions": "proposed or executed actions with their audit evidence",
    "pending_explanations": "why pending pods could not run, each time the pending queue was "
    "evaluated, beside kube-scheduler's own verdict",
    "cluster_frag": "the cluster's fragmentation after each evaluation",
    "cluster_frag_1m": "per-minute rollup of cluster_frag (a plain view over the deduplicated "
    "table)",
    "dead_letter": "rows that could never be written, with the reason: nothing is dropped silently",
    "schema_migrations": "the numbered migrations (sql/migrations) applied to this store",
}
"""One line per table on what it holds, from the comments in ``sql/migrations/*.sql``."""


@dataclass(frozen=True, slots=True)
class _Scan:
    words: list[str]
    """Bare words outside strings, quoted names and comments, in order."""
    statement: str
    """The text before the first ``;`` outside strings and comments (all of it if none)."""
    after: str
    """What follows that ``;``, comments removed and stripped: not empty means a second
    statement."""


def read_only_statement(text: str) -> str:
    """The statement to run, or a :class:`QueryError` saying in one line why it is refused.

    A single trailing ``;`` is allowed (and dropped); anything but comments after it is a
    second statement and refused, whatever it is."""
    scan = _scan(text)
    if not scan.words:
        raise QueryError("--query is empty: give one SELECT, WITH, SHOW or DESCRIBE statement")
    if scan.after:
        raise QueryError(
            f"--query refused: it holds more than one statement (text after ';': "
            f"{_preview(scan.after)!r}); gpufrag sql runs one read-only statement at a time"
        )
    first = scan.words[0].upper()
    if first not in ALLOWED:
        raise QueryError(
            f"--query refused: gpufrag sql runs one read-only statement (SELECT, WITH, SHOW, "
            f"DESCRIBE), not {first}"
        )
    if first == "WITH" and any(w.upper() == "INSERT" for w in scan.words):
        raise QueryError(
            "--query refused: gpufrag sql runs one read-only statement (SELECT, WITH, SHOW, "
            "DESCRIBE), not an INSERT"
        )
    return scan.statement.strip()


def bound_params(sql: str, given: Mapping[str, str]) -> dict[str, str]:
    """The ``--param`` values, each checked to have a ``{name:Type}`` placeholder in ``sql``
    (ClickHouse converts and checks the value against that type), and every placeholder a
    value."""
    used = {m.group(1) for m in _PLACEHOLDER.finditer(sql)}
    for name in given:
        if name not in used:
            raise QueryError(
                f"--param {name} is not used by the query: write {{{name}:Type}} where its "
                "value goes (values are bound by ClickHouse, never pasted into the SQL)"
            )
    missing = sorted(used - set(given))
    if missing:
        raise QueryError(f"the query's {{{missing[0]}:...}} needs --param {missing[0]}=<value>")
    return dict(given)


def checked_query(text: str, given: Mapping[str, str]) -> tuple[str, dict[str, str]]:
    """A user's ``--query`` and its ``--param`` values, checked before the store is opened."""
    sql = read_only_statement(text)
    return sql, bound_params(sql, given)


def run_read_only(
    store: Store, sql: str, parameters: Mapping[str, str] | None = None
) -> QueryResult:
    """Run ``sql`` with ``readonly = 1``: the guard that holds whatever the text check missed.

    On chDB a write refused this way can leave the process's session read-only (the driver
    sets the setting for the call and cannot set it back), so this is for commands that only
    read, as `gpufrag sql` does after opening the store."""
    try:
        return store.query(sql, parameters, settings=READ_ONLY_SETTINGS)
    except StoreError as exc:
        if "(READONLY)" not in exc.message:
            raise
        raise StoreError(
            f"refused by ClickHouse's readonly setting (gpufrag sql only reads; table "
            f"functions such as file() and url() are refused too): {exc.message}"
        ) from exc


def schema(store: Store) -> list[dict[str, object]]:
    """Every table and view of the store's database: name, engine, what it holds, columns."""
    tables = run_read_only(
        store,
        "SELECT name, engine FROM system.tables WHERE database = currentDatabase() ORDER BY name",
    )
    columns = run_read_only(
        store,
        "SELECT table, name, type FROM system.columns WHERE database = currentDatabase() "
        "ORDER BY table, position",
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


def _preview(text: str) -> str:
    folded = " ".join(text.split())
    return folded if len(folded) <= 40 else folded[:37] + "..."


def _scan(text: str) -> _Scan:
    """Split at the first ``;`` outside string literals, quoted names and comments (``--``
    and ``/* */``), and collect the bare words before it. What it does not know (heredocs,
    ``#`` comments) it reads as code, so a doubt ends in a refusal, never in a second
    statement let through."""
    words: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("--", i):
            i = _line_end(text, i)
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
        elif c in "'\"`":
            i = _quoted_end(text, i)
        elif c == ";":
            return _Scan(words, text[:i], _without_comments(text[i + 1 :]))
        elif m := _WORD.match(text, i):
            words.append(m.group())
            i = m.end()
        else:
            i += 1
    return _Scan(words, text, "")


def _line_end(text: str, i: int) -> int:
    end = text.find("\n", i)
    return len(text) if end < 0 else end + 1


def _quoted_end(text: str, i: int) -> int:
    """Past the literal or quoted name starting at ``i`` (backslash escapes; a doubled quote
    is read as the literal ending and another starting, which comes to the same)."""
    quote, j, n = text[i], i + 1, len(text)
    while j < n:
        if text[j] == "\\":
            j += 2
        elif text[j] == quote:
            return j + 1
        else:
            j += 1
    return n


def _without_comments(text: str) -> str:
    """``text`` with comments removed and stripped; anything else (even a second ``;``) is
    kept, so that only comments and blanks may follow the one allowed ``;``."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        if text.startswith("--", i):
            i = _line_end(text, i)
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out).strip()
