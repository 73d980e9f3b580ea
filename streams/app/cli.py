"""The `gpufrag` command."""

from __future__ import annotations

import typer

from streams.app.commands.bench import bench
from streams.app.commands.experiment import experiment
from streams.app.commands.frag import frag

app = typer.Typer(
    name="gpufrag",
    help="Find GPU fragmentation: free GPUs that pending work cannot use, and why.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command()(frag)
app.command()(experiment)
app.command()(bench)


def main() -> None:
    app()
