"""`gpufrag sql`: the named analyses over the stored history."""

from __future__ import annotations

import csv
import io
import json
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from connectors.clickhouse.migrate import default_sql_dir
from connectors.clickhouse.store import Store
from streams.app.errors import user_errors
from streams.app.history import open_history_to_read, store_settings
from streams.app.named_queries import (
    NamedQuery,
    QueryError,
    bind,
    load_queries,
    parse_param_options,
)


class Format(StrEnum):
    TABLE = "table"
    CSV = "csv"
    JSON = "json"


def queries_dir() -> Path:
    return default_sql_dir().parent / "queries"


def latest_run(store: Store) -> str | None:
    res = store.query("SELECT run_id FROM runs FINAL ORDER BY started_at DESC, run_id LIMIT 1")
    return str(res.rows[0][0]) if res.rows else None


def _plain(value: object) -> object:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def run_named(
    store: Store, query: NamedQuery, params: dict[str, str]
) -> tuple[list[str], list[tuple[object, ...]]]:
    values = bind(query, params, latest_run=lambda: latest_run(store))
    res = store.query(query.sql, parameters=values)
    return res.columns, res.rows


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
    store: Annotated[str | None, typer.Option(help="History store DSN (as for replay).")] = None,
) -> None:
    """Run a named analysis over the stored history; run_id defaults to the latest run."""
    with user_errors():
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
        given = parse_param_options(param or [])
        st = open_history_to_read(store_settings(store))
        columns, rows = run_named(st, queries[name], given)
    if fmt is Format.JSON:
        typer.echo(json.dumps([dict(zip(columns, map(_plain, r), strict=True)) for r in rows]))
    elif fmt is Format.CSV:
        buf = io.StringIO()
        w = csv.writer(buf)
        w.writerow(columns)
        for r in rows:
            w.writerow([_plain(v) for v in r])
        typer.echo(buf.getvalue(), nl=False)
    else:
        table = Table(title=f"{name} ({len(rows)} rows)")
        for c in columns:
            table.add_column(c)
        for r in rows:
            table.add_row(*(str(_plain(v)) for v in r))
        Console().print(table)
