"""`gpufrag dcgm-parse`: what gpufrag reads from a saved dcgm-exporter page, and what it refuses."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

from connectors.dcgm import parse_exposition
from models import to_json
from streams.app.errors import user_errors


def dcgm_parse(
    file: Annotated[
        Path, typer.Argument(help="A saved dcgm-exporter page (curl http://<node>:9400/metrics).")
    ],
    node: Annotated[
        str | None,
        typer.Option(help="Node name for lines without a Hostname label (--no-hostname)."),
    ] = None,
) -> None:
    """Print the GPU samples in a saved dcgm-exporter page as JSON lines, one per GPU (or MIG
    instance); refused lines go to stderr with their line numbers. Exits 1 when nothing in the
    file makes a sample, so a wrong file or URL does not pass for an idle node."""
    with user_errors():
        data = file.read_bytes()
    result = parse_exposition(data, scraped_at=datetime.now(UTC), default_node=node)
    for timed in result.samples:
        typer.echo(to_json(timed.sample).decode())
    if result.rejected:
        kinds = Counter(r.kind for r in result.rejected)
        summary = ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items()))
        typer.echo(f"{len(result.rejected)} lines rejected ({summary}):", err=True)
        for item in result.rejected:
            typer.echo(f"  {item}", err=True)
    if result.blanks:
        typer.echo(
            f"{result.blanks} values DCGM reported as blank or not supported (kept as unknown)",
            err=True,
        )
    if not result.samples:
        typer.echo(f"gpufrag: error: no GPU samples in {file}", err=True)
        raise typer.Exit(1)
