"""The `gpufrag` command."""

from __future__ import annotations

import importlib
import sys

import typer

try:  # typer >= 0.22 vendors its own click; its exceptions are what the app raises
    from typer._click import exceptions as click_exceptions
except ImportError:  # pragma: no cover - older typer on real click
    from click import exceptions as click_exceptions  # type: ignore[no-redef]

from streams.app.console.errors import EXIT_USAGE

COMMANDS: dict[str, tuple[str, str]] = {
    "replay": ("replay", "Replay a trace through the pipeline and store the history."),
    "sql": ("sql", "Run a named analysis or a read-only SELECT on the history."),
    "explain": ("explain", "Why a pending pod waits, and the fix a run stored for it."),
    "report": ("report", "Write a self-contained HTML page about a stored run."),
    "actions": ("actions", "List the actions a run proposed or executed, and why."),
    "whatif": ("whatif", "Place a run's pods again under another policy; compare."),
    "publish": ("publish", "Send events onto the input topics, keyed for the workers."),
    "worker": ("worker", "Run one worker of the distributed runner, over Kafka."),
    "sink": ("sink", "Store the distributed runner's history from its topics."),
    "alert": ("alert", "Send the workers' signals to the configured alert sinks."),
    "actuate": ("actuate", "Carry out the workers' action requests; publish outcomes."),
    "watch": ("watch", "Run the live sources and send their events to the bus."),
    "extender": ("extender", "Serve kube-scheduler's extender: fit and FGD scores by card."),
    "frag": ("frag", "Fragmentation of the empty cluster for a pod list."),
    "experiment": ("experiment", "Run the FGD paper's placement protocol on a trace."),
    "bench": ("bench", "Time the pipeline beside same-run baselines; print ratios."),
    "nvml-sample": ("nvml_sample", "Sample this machine's GPUs through NVML; print JSON."),
    "dcgm-parse": ("dcgm_parse", "Print a saved dcgm-exporter page's GPU samples as JSON."),
    "inspect": ("inspect", "Analyse one snapshot of a cluster (kubectl JSON)."),
    "check-config": ("check_config", "Check the settings and what they point at."),
    "migrate": ("migrate", "Apply the SQL migrations the store lacks."),
}
"""Command name -> (its module in streams.app.commands, whose function has the module's name;
the line `gpufrag --help` lists it with). The lines are kept here so that the list needs no
command imported: loading all twenty took 2.0 s of `gpufrag --help` on a busy 2-core machine,
against 0.2 s for typer and pydantic alone."""


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

    for name, (module_name, summary) in COMMANDS.items():
        if name in names:
            module = importlib.import_module(f"streams.app.commands.{module_name}")
            app.command(name, short_help=summary)(getattr(module, module_name))
        elif not names:
            app.command(name, short_help=summary)(_listed_only)
    return app


def _listed_only() -> None:
    """Stands for a command in the list `gpufrag --help` prints; never run (a command named on
    the line is loaded for real, see ``_commands_for``)."""
    raise AssertionError("a listed-only command was run")


def _print_version(value: bool) -> None:
    """``--version``: the installed distribution's version, so an image or a wheel says which
    release it holds (the image's build and a container's first check read it)."""
    if value:
        from importlib.metadata import version  # 50 ms: only for this

        typer.echo(f"gpufrag {version('gpufrag')}")
        raise typer.Exit()


def _commands_for(argv: list[str]) -> list[str]:
    """Only the command being run is imported: the commands' modules load Kafka, chDB,
    gRPC and numpy between them (0.7 s of a 1.2 s start on a busy 2-core machine), and
    `gpufrag experiment` refusing a bad trace should not wait for the others. Without a
    known command (``--help``, ``--version``, none, a misspelt one) none is loaded: the
    list of commands comes from ``COMMANDS``."""
    first = next((a for a in argv if not a.startswith("-")), None)
    return [first] if first in COMMANDS else []


def app_for(argv: list[str]) -> typer.Typer:
    """The app as the command line ``argv`` gets it: with only its command loaded."""
    return build_app(_commands_for(argv))


def main() -> None:
    """Usage errors read as one line, like every other error gpufrag reports."""
    try:
        rc = app_for(sys.argv[1:])(standalone_mode=False)
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
    except Exception as exc:
        lines = _setting_problems(exc)
        if lines is None:
            raise  # not the user's settings: a bug, with its traceback
        for line in lines:
            typer.echo(f"gpufrag: error: {line}", err=True)
        sys.exit(EXIT_USAGE)
    sys.exit(rc if isinstance(rc, int) else 0)


def _setting_problems(exc: Exception) -> list[str] | None:
    """The lines of a settings error (None: the exception is something else). pydantic and
    the settings model are imported only here, on the way out: a command that never read
    its settings (`--help`) did not load them, and so cannot have failed on them (they are
    130 ms of a 0.4 s `gpufrag --help`)."""
    if "pydantic" not in sys.modules:
        return None
    from pydantic import ValidationError
    from pydantic_settings import SettingsError

    from streams.app.console.setting_errors import setting_lines

    if not isinstance(exc, ValidationError | SettingsError):
        return None
    return setting_lines(exc)
