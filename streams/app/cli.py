"""The `gpufrag` command."""

from __future__ import annotations

import importlib
import importlib.metadata
import sys

import typer
from pydantic import ValidationError
from pydantic_settings import SettingsError

try:  # typer >= 0.22 vendors its own click; its exceptions are what the app raises
    from typer._click import exceptions as click_exceptions
except ImportError:  # pragma: no cover - older typer on real click
    from click import exceptions as click_exceptions  # type: ignore[no-redef]

from streams.app.console.errors import EXIT_USAGE
from streams.app.console.setting_errors import setting_lines

COMMANDS = {
    "replay": "replay",
    "sql": "sql",
    "explain": "explain",
    "report": "report",
    "actions": "actions",
    "whatif": "whatif",
    "publish": "publish",
    "worker": "worker",
    "sink": "sink",
    "alert": "alert",
    "actuate": "actuate",
    "watch": "watch",
    "frag": "frag",
    "experiment": "experiment",
    "bench": "bench",
    "nvml-sample": "nvml_sample",
    "dcgm-parse": "dcgm_parse",
    "inspect": "inspect",
    "check-config": "check_config",
    "migrate": "migrate",
}
"""Command name -> its module in streams.app.commands (the function has the module's name)."""


def build_app(names: list[str]) -> typer.Typer:
    """The app with the commands ``names``, in COMMANDS' order."""
    app = typer.Typer(
        name="gpufrag",
        help="Find GPU fragmentation: free GPUs that pending work cannot use, and why.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
    )

    @app.callback()
    def group(
        version: bool = typer.Option(
            False,
            "--version",
            is_eager=True,
            callback=_print_version,
            help="Print gpufrag's version and exit.",
        ),
    ) -> None:
        # With one command loaded, typer would otherwise make it the whole app and read
        # "experiment" as its first argument.
        pass

    for name in COMMANDS:
        if name in names:
            module = importlib.import_module(f"streams.app.commands.{COMMANDS[name]}")
            app.command(name)(getattr(module, COMMANDS[name]))
    return app


def _print_version(value: bool) -> None:
    """``--version``: the installed distribution's version, so an image or a wheel says which
    release it holds (the image's build and a container's first check read it)."""
    if value:
        typer.echo(f"gpufrag {importlib.metadata.version('gpufrag')}")
        raise typer.Exit()


def _commands_for(argv: list[str]) -> list[str]:
    """Only the command being run is imported: the commands' modules load Kafka, chDB,
    gRPC and numpy between them (0.7 s of a 1.2 s start on a busy 2-core machine), and
    `gpufrag experiment` refusing a bad trace should not wait for the others. ``--version``
    alone loads none."""
    if argv == ["--version"]:
        return []
    first = next((a for a in argv if not a.startswith("-")), None)
    return [first] if first in COMMANDS else list(COMMANDS)


def main() -> None:
    """Usage errors read as one line, like every other error gpufrag reports."""
    try:
        rc = build_app(_commands_for(sys.argv[1:]))(standalone_mode=False)
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
    except (ValidationError, SettingsError) as exc:
        lines = setting_lines(exc)
        if lines is None:
            raise  # not the user's settings: a bug, with its traceback
        for line in lines:
            typer.echo(f"gpufrag: error: {line}", err=True)
        sys.exit(EXIT_USAGE)
    sys.exit(rc if isinstance(rc, int) else 0)
