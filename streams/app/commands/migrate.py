"""`gpufrag migrate`: bring a store's schema up to date, and say what that took."""

from __future__ import annotations

from typing import Annotated

import typer

from connectors.clickhouse.cluster_ddl import cluster_statements
from connectors.clickhouse.migrate import apply_migrations, default_sql_dir, load_migrations
from connectors.clickhouse.store import open_store
from streams.app.console.errors import user_errors
from streams.app.console.options import StoreOption
from streams.app.lifecycle.history import store_settings


def migrate(
    store: StoreOption = None,
    cluster: Annotated[
        str | None,
        typer.Option(
            help="Print the DDL for this ClickHouse cluster (replicated tables ON CLUSTER, "
            "Distributed tables over them) instead of applying anything; run it with "
            "clickhouse-client --multiquery."
        ),
    ] = None,
) -> None:
    """Apply the SQL migrations (sql/migrations) the store lacks, in order, and name each one
    applied; a store already up to date is left as it is, and the command says so.

    Every command that writes or reads the store migrates it when it opens it; this one does
    only that, and tells what it changed: a deploy step before the others start (a Helm
    hook, an init container). With --cluster it connects to nothing and prints the statements
    that create the history on a ClickHouse cluster, in the store settings' database."""
    settings = store_settings(store)
    if cluster is not None:
        with user_errors():
            statements = cluster_statements(
                load_migrations(default_sql_dir()), cluster=cluster, database=settings.database
            )
        for sql in statements:
            typer.echo(f"{sql};\n")
        return
    with user_errors():
        sql_dir = default_sql_dir()
        latest = load_migrations(sql_dir)[-1].name
        with open_store(settings) as opened:
            applied = apply_migrations(opened, sql_dir)
            where = opened.describe()
    for name in applied:
        typer.echo(f"applied {name}")
    if applied:
        count = f"{len(applied)} migration{'s' if len(applied) != 1 else ''}"
        typer.echo(f"{where}: {count} applied; the schema is at {latest}")
    else:
        typer.echo(f"{where}: nothing to apply; the schema is already at {latest}")
