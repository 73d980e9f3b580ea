"""`gpufrag dcgm-parse`: what gpufrag reads from a saved dcgm-exporter page, and what it refuses.

Exit status: 0 when every sample line was used; 1 when some lines were refused (the samples of
the rest are still printed) or nothing made a sample, so a wrong file or URL does not pass for
an idle node; 2 when the input cannot be read at all (missing, a directory, unreadable, or over
``GPUFRAG_DCGM__MAX_PAGE_BYTES``).
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

from connectors.dcgm import parse_exposition
from models import to_json
from streams.app.console.bounded_read import read_bounded
from streams.app.lifecycle.settings_load import load_settings

SHOWN_MAX = 100
"""Refused lines listed one by one; past this, a count. A binary file of 16 MiB would otherwise
print some 65,000 lines of "not UTF-8 text" and bury the summary."""


def read_capped(file: Path, cap: int) -> bytes:
    """The file's bytes, reading no more than ``cap`` + 1 of them: a page past the cap (a disk
    image, /dev/zero) stops the command before it is held in memory."""
    data, _ = read_bounded(
        file,
        cap=cap,
        setting="GPUFRAG_DCGM__MAX_PAGE_BYTES",
        hint="a dcgm-exporter page is about 5 KB per GPU",
    )
    return data


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
    instance); refused lines go to stderr with their line numbers and reasons. Exits 0 when
    every line was used, 1 when some were refused (the rest still printed) or nothing made a
    sample, 2 when the file cannot be read or is over GPUFRAG_DCGM__MAX_PAGE_BYTES (4 MiB)."""
    settings = load_settings().dcgm
    data = read_capped(file, settings.max_page_bytes)
    result = parse_exposition(
        data,
        scraped_at=datetime.now(UTC),
        default_node=node,
        min_timestamp=settings.min_timestamp,
    )
    for timed in result.samples:
        typer.echo(to_json(timed.sample).decode())
    refused = sum(len(r.lines) for r in result.rejected)
    if result.rejected:
        kinds = Counter(r.kind for r in result.rejected for _ in r.lines)
        summary = ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items()))
        typer.echo(f"{refused} lines refused ({summary}):", err=True)
        for item in result.rejected[:SHOWN_MAX]:
            typer.echo(f"  {item}", err=True)
        if len(result.rejected) > SHOWN_MAX:
            typer.echo(f"  ... {len(result.rejected) - SHOWN_MAX} more not shown", err=True)
    if result.blanks:
        typer.echo(
            f"{result.blanks} values DCGM reported as blank or not supported (kept as unknown)",
            err=True,
        )
    if not result.samples:
        typer.echo(f"gpufrag: error: no GPU samples in {file}", err=True)
        raise typer.Exit(1)
    if refused:
        n = len(result.samples)
        typer.echo(
            f"gpufrag: error: {refused} lines of {file} refused; {n} samples printed", err=True
        )
        raise typer.Exit(1)
