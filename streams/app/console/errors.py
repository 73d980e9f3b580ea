"""One clear line and a non-zero exit for what a user can fix; tracebacks only for our bugs."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

import typer

EXIT_USAGE = 2


_USER_ERRORS = (
    ("connectors.trace.records", "TraceFormatError"),
    ("connectors.trace.published", "PublishedResultsError"),
    ("streams.placement.experiment", "ProtocolError"),
    ("streams.simulation.cluster", "TraceReplayError"),
    ("connectors.clickhouse.dsn", "StoreError"),
    ("connectors.kafka.security", "KafkaSecurityError"),
    ("streams.distributed.state_schema", "StateSchemaError"),
    ("streams.app.queries.named_queries", "QueryError"),
    ("streams.app.lifecycle.plugins", "PluginError"),
    ("models.component_registry", "UnknownComponent"),
)
"""Errors a user can fix, by module: looked up, not imported, since an exception of a class
exists only once its module is loaded, and importing them all would load chDB and numpy (a
third of a second) before `gpufrag experiment` can refuse a bad trace."""


def _is_user_error(exc: Exception) -> bool:
    for module, name in _USER_ERRORS:
        loaded = sys.modules.get(module)
        if loaded is not None and isinstance(exc, getattr(loaded, name)):
            return True
    return False


@contextmanager
def user_errors() -> Iterator[None]:
    try:
        yield
    except FileNotFoundError as exc:
        typer.echo(f"gpufrag: error: file not found: {exc.filename}", err=True)
        raise typer.Exit(EXIT_USAGE) from None
    except IsADirectoryError as exc:
        typer.echo(f"gpufrag: error: is a directory, not a file: {exc.filename}", err=True)
        raise typer.Exit(EXIT_USAGE) from None
    except PermissionError as exc:
        typer.echo(f"gpufrag: error: permission denied: {exc.filename}", err=True)
        raise typer.Exit(EXIT_USAGE) from None
    except Exception as exc:
        if not _is_user_error(exc):
            raise
        typer.echo(f"gpufrag: error: {exc}", err=True)
        raise typer.Exit(EXIT_USAGE) from None
