"""One clear line and a non-zero exit for what a user can fix; tracebacks only for our bugs."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import typer

from connectors.clickhouse.dsn import StoreError
from connectors.trace.alibaba_csv import TraceFormatError
from connectors.trace.published import PublishedResultsError
from streams.app.named_queries import QueryError
from streams.placement.experiment import ProtocolError
from streams.simulation.cluster import TraceReplayError

EXIT_USAGE = 2


@contextmanager
def user_errors() -> Iterator[None]:
    try:
        yield
    except (
        TraceFormatError,
        PublishedResultsError,
        ProtocolError,
        TraceReplayError,
        StoreError,
        QueryError,
    ) as exc:
        typer.echo(f"gpufrag: error: {exc}", err=True)
        raise typer.Exit(EXIT_USAGE) from None
    except FileNotFoundError as exc:
        typer.echo(f"gpufrag: error: file not found: {exc.filename}", err=True)
        raise typer.Exit(EXIT_USAGE) from None
    except IsADirectoryError as exc:
        typer.echo(f"gpufrag: error: is a directory, not a file: {exc.filename}", err=True)
        raise typer.Exit(EXIT_USAGE) from None
    except PermissionError as exc:
        typer.echo(f"gpufrag: error: permission denied: {exc.filename}", err=True)
        raise typer.Exit(EXIT_USAGE) from None
