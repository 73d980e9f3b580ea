"""`gpufrag check-config`: the settings, and what they point at, checked before a deploy
starts anything: one line per problem, exit status 1 when there is any."""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer
from pydantic import ValidationError
from pydantic_settings import SettingsError

from streams.app.checking.check_plan import Component, Mode, plan_checks
from streams.app.checking.run import check_timeout_s, checks_for, process_age_s, run_checks
from streams.app.console.options import BootstrapOption, StoreOption
from streams.app.console.setting_errors import setting_lines
from streams.app.lifecycle.history import store_settings
from streams.app.lifecycle.plugins import PluginError
from streams.app.lifecycle.settings_load import load_settings

EXIT_PROBLEMS = 1


def check_config(
    component: Annotated[
        list[str] | None,
        typer.Option(
            "--component",
            metavar="NAMES",
            help="The components this deployment runs, comma-separated or repeated: "
            "watch, worker, sink, alert, actuate; default all of them.",
        ),
    ] = None,
    mode: Annotated[
        Mode | None,
        typer.Option(
            help="embedded: one `watch --bus embedded` hosts them all, no Kafka; distributed: "
            "separate commands over Kafka. Default: GPUFRAG_WATCH__BUS (kafka: distributed)."
        ),
    ] = None,
    store: StoreOption = None,
    bootstrap: BootstrapOption = None,
) -> None:
    """Check the settings and what they point at: Kafka, the store, the guardrails,
    Alertmanager, and the RBAC permissions the components need (SelfSubjectAccessReview).

    Prints one line per problem and exits 1 if there is any, else one "ok" line. The checks
    run at once, each cut after 5 s (less if the start was slow), so it ends within 15 s
    even when nothing answers."""
    try:
        settings = load_settings()
    except (ValidationError, SettingsError, PluginError) as exc:
        lines = setting_lines(exc) if not isinstance(exc, PluginError) else [str(exc)]
        if lines is None:
            raise
        for line in lines:
            typer.echo(f"settings: {line}")
        raise typer.Exit(EXIT_PROBLEMS) from None
    components = _components(component)
    chosen = mode or (Mode.EMBEDDED if settings.watch.bus == "embedded" else Mode.DISTRIBUTED)
    plan = plan_checks(settings, components=components, mode=chosen)
    timeout_s = check_timeout_s(process_age_s=process_age_s())
    checks = checks_for(
        settings,
        plan,
        store=store_settings(store, loaded=settings),
        kafka=settings.kafka.at(bootstrap),
        timeout_s=timeout_s,
    )
    problems = asyncio.run(run_checks(checks, timeout_s=timeout_s))
    for line in problems:
        typer.echo(line)
    if problems:
        raise typer.Exit(EXIT_PROBLEMS)
    took = process_age_s()
    names = ", ".join(c.target for c in checks) or "nothing to check"
    skipped = "".join(f"; not checked: {why}" for why in plan.skipped)
    typer.echo(f"ok: {names} ({chosen.value}: {', '.join(components)}; {took:.1f} s){skipped}")


def _components(given: list[str] | None) -> tuple[Component, ...]:
    if not given:
        return tuple(Component)
    names = [n.strip() for text in given for n in text.split(",") if n.strip()]
    known = {c.value: c for c in Component}
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise typer.BadParameter(
            f"unknown component {', '.join(unknown) or '(none)'}; known: {', '.join(known)}",
            param_hint="--component",
        )
    return tuple(c for c in Component if c.value in names)
