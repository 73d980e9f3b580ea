"""`gpufrag sql`: the named analyses over the stored history, a user's own read-only query
(``--query``, see :mod:`streams.app.queries.adhoc_sql`), and the tables there are to query
(``--schema``)."""

from __future__ import annotations

import csv
import io
import json
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from connectors.clickhouse.migrate import default_sql_dir
from streams.app.console.errors import user_errors
from streams.app.console.terminal import for_terminal
from streams.app.queries.json_values import plain
from streams.app.queries.named_queries import (
    NamedQuery,
    QueryError,
    bind,
    load_queries,
    parse_param_options,
)

if TYPE_CHECKING:
    from connectors.clickhouse.store import Store
    from streams.app.lifecycle.runs import RunChoice

# The store's side (clickhouse-connect, the models, the settings: about 0.35 s) is imported in
# the functions that open a store, so `gpufrag sql --list` reads the SQL folder and no more.

RUN_OPTION = "--param run_id="


class Format(StrEnum):
    TABLE = "table"
    CSV = "csv"
    JSON = "json"


def queries_dir() -> Path:
    return default_sql_dir().parent / "queries"


def read_run(store: Store, run_id: str | None) -> str:
    """The run a ``--run`` command reads (the option, else the latest finished run), said on
    stderr as :meth:`RunChoice.note` words it."""
    from streams.app.lifecycle.runs import choose_run

    choice = choose_run(store, run_id, option="--run ")
    _tell(choice)
    return choice.run.run_id


def _tell(choice: RunChoice | None) -> None:
    note = choice.note() if choice is not None else None
    if note:
        typer.echo(f"gpufrag: {note}", err=True)


def run_named(
    store: Store, query: NamedQuery, params: dict[str, str]
) -> tuple[list[str], list[tuple[object, ...]], RunChoice | None]:
    """The query's rows, and which run they are of when it takes a run (for the stderr note:
    the default is the latest finished run, and a run that did not finish is partial)."""
    from streams.app.lifecycle.runs import choose_run

    chosen: list[RunChoice] = []

    def latest() -> str:
        chosen.append(choose_run(store, None, option=RUN_OPTION))
        return chosen[-1].run.run_id

    values = bind(query, params, latest_run=latest)
    if "run_id" in params:
        chosen.append(choose_run(store, params["run_id"], option=RUN_OPTION))
    res = store.query(query.sql, parameters=values)
    return res.columns, res.rows, (chosen[-1] if chosen else None)


def sql(
    name: Annotated[str | None, typer.Argument(help="Named query to run (see --list).")] = None,
    param: Annotated[
        list[str] | None,
        typer.Option("--param", "-p", help="Query parameter as name=value; repeatable."),
    ] = None,
    fmt: Annotated[Format, typer.Option("--format", help="Output format.")] = Format.TABLE,
    list_queries: Annotated[
        bool, typer.Option("--list", help="List the named queries and their parameters.")
    ] = False,
    query: Annotated[
        str | None,
        typer.Option(
            "--query",
            help="Run one SELECT (or WITH ... SELECT) of your own over the store's tables, "
            "read-only; --param k=v binds a {k:Type} placeholder in it.",
        ),
    ] = None,
    show_schema: Annotated[
        bool, typer.Option("--schema", help="List the store's tables and their columns.")
    ] = False,
    store: Annotated[str | None, typer.Option(help="History store DSN (as for replay).")] = None,
) -> None:
    """Run a named analysis over the stored history; run_id defaults to the latest finished
    run. Which run was read is said on stderr (and a run that did not finish, when named).
    --query runs one SELECT of your own over the store's tables, read-only and within the
    GPUFRAG_SQL__* limits; --schema lists the tables."""
    with user_errors():
        _check_one_mode(name, query=query, show_schema=show_schema, list_queries=list_queries)
        if query is not None or show_schema:
            _adhoc(query, parse_param_options(param or []), fmt=fmt, dsn=store)
            return
        queries = load_queries(queries_dir())
        if list_queries or name is None:
            for q in queries.values():
                params = ", ".join(
                    f"{p.name} {p.type}" + (f" = {p.default}" if p.default else "")
                    for p in q.params
                )
                typer.echo(f"{q.name}  ({params})\n    {q.description}")
            return
        if name not in queries:
            raise QueryError(f"no named query {name!r}; known: {', '.join(queries)}")
        from streams.app.lifecycle.history import open_history_to_read, store_settings

        given = parse_param_options(param or [])
        st = open_history_to_read(store_settings(store))
        columns, rows, choice = run_named(st, queries[name], given)
    _tell(choice)
    _print_rows(columns, rows, fmt=fmt, title=name)


def _check_one_mode(
    name: str | None, *, query: str | None, show_schema: bool, list_queries: bool
) -> None:
    """A named query, --query, --schema and --list each say what to run: two at once would
    leave one silently unused."""
    given = [
        what
        for what, on in (
            (f"the named query {name!r}", name is not None),
            ("--query", query is not None),
            ("--schema", show_schema),
            ("--list", list_queries),
        )
        if on
    ]
    if len(given) > 1:
        raise QueryError(f"{' and '.join(given)} cannot be used together: give one")


def _adhoc(query: str | None, given: dict[str, str], *, fmt: Format, dsn: str | None) -> None:
    """--query (in a read-only session whose limits are fixed before it runs) or --schema
    (when ``query`` is None: gpufrag's own query of the catalogue)."""
    from connectors.clickhouse.read_only import open_read_only
    from streams.app.lifecycle.history import open_history_to_read, store_settings
    from streams.app.lifecycle.settings_load import load_settings
    from streams.app.queries.adhoc_sql import run_adhoc, schema, schema_lines

    if query is None and given:
        raise QueryError("--param goes with a named query or --query, not --schema")
    settings = load_settings()
    st = open_history_to_read(store_settings(dsn, loaded=settings))
    try:
        if query is not None:
            with open_read_only(st, settings.sql) as session:
                res = run_adhoc(session, query, given, limits=settings.sql)
            _print_rows(res.columns, res.rows, fmt=fmt, title="query")
            return
        tables = schema(st)
    finally:
        st.close()
    if fmt is Format.JSON:
        typer.echo(json.dumps(tables))
    else:
        typer.echo("\n".join(schema_lines(tables)))


def _print_rows(
    columns: list[str], rows: list[tuple[object, ...]], *, fmt: Format, title: str
) -> None:
    if fmt is Format.JSON:
        typer.echo(
            json.dumps(
                [dict(zip(columns, map(plain, r), strict=True)) for r in rows], allow_nan=False
            )
        )
    elif fmt is Format.CSV:
        buf = io.StringIO()
        w = csv.writer(buf)
        w.writerow(columns)
        for r in rows:
            w.writerow([plain(v) for v in r])
        typer.echo(buf.getvalue(), nl=False)
    else:
        table = Table(title=f"{title} ({len(rows)} rows)")
        for c in columns:
            table.add_column(c)
        for r in rows:
            # the store holds text from the cluster: no markup, no escape sequences
            table.add_row(*(Text(for_terminal(str(plain(v)))) for v in r))
        Console().print(table)
