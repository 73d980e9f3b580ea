"""The `gpufrag` command."""

from __future__ import annotations

import sys

import typer
from pydantic import ValidationError

from models import GpufragSettings

try:  # typer >= 0.22 vendors its own click; its exceptions are what the app raises
    from typer._click import exceptions as click_exceptions
except ImportError:  # pragma: no cover - older typer on real click
    from click import exceptions as click_exceptions  # type: ignore[no-redef]

from streams.app.commands.bench import bench
from streams.app.commands.dcgm_parse import dcgm_parse
from streams.app.commands.experiment import experiment
from streams.app.commands.explain import explain
from streams.app.commands.frag import frag
from streams.app.commands.nvml_sample import nvml_sample
from streams.app.commands.publish import publish
from streams.app.commands.replay import replay
from streams.app.commands.report import report
from streams.app.commands.sink import sink
from streams.app.commands.sql import sql
from streams.app.commands.watch import watch
from streams.app.commands.worker import worker
from streams.app.errors import EXIT_USAGE

app = typer.Typer(
    name="gpufrag",
    help="Find GPU fragmentation: free GPUs that pending work cannot use, and why.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
app.command()(replay)
app.command()(sql)
app.command()(explain)
app.command()(report)
app.command()(publish)
app.command()(worker)
app.command()(sink)
app.command()(watch)
app.command()(frag)
app.command()(experiment)
app.command()(bench)
app.command("nvml-sample")(nvml_sample)
app.command("dcgm-parse")(dcgm_parse)


def main() -> None:
    """Usage errors read as one line, like every other error gpufrag reports."""
    try:
        rc = app(standalone_mode=False)
    except click_exceptions.NoArgsIsHelpError as exc:
        typer.echo(exc.format_message())
        sys.exit(0)
    except click_exceptions.UsageError as exc:
        hint = f" (try '{exc.ctx.command_path} --help')" if exc.ctx else ""
        typer.echo(f"gpufrag: error: {exc.format_message()}{hint}", err=True)
        sys.exit(EXIT_USAGE)
    except click_exceptions.ClickException as exc:
        typer.echo(f"gpufrag: error: {exc.format_message()}", err=True)
        sys.exit(exc.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        typer.echo("gpufrag: interrupted", err=True)
        sys.exit(130)
    except ValidationError as exc:
        if exc.title != GpufragSettings.__name__:
            raise  # not the user's settings: a bug, with its traceback
        for err in exc.errors():
            name = "GPUFRAG_" + "__".join(str(part) for part in err["loc"]).upper()
            why = "no such setting" if err["type"] == "extra_forbidden" else err["msg"]
            typer.echo(f"gpufrag: error: setting {name}: {why}", err=True)
        sys.exit(EXIT_USAGE)
    sys.exit(rc if isinstance(rc, int) else 0)
