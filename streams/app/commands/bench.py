"""`gpufrag bench`: the benchmark harness, each figure beside a baseline measured in the same
run on the same input, so the ratio means the same on any machine (docs/performance.md)."""

from __future__ import annotations

import os
import platform
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Literal

import typer
from rich.console import Console

from streams.app.bench.registry import CASES, chosen
from streams.app.bench.report import print_report, write_json
from streams.app.bench.run_all import run_cases
from streams.app.bench.runner import SCALES, BenchError
from streams.app.console.errors import EXIT_USAGE

KAFKA_ENV = "GPUFRAG_KAFKA__BOOTSTRAP"
TABLE_WIDTH = 140
"""Piped (CI's log), rich would fold the table into 80 columns; its 10 columns fit 140."""


def bench(
    scale: Annotated[
        Literal["small", "large"],
        typer.Option(
            help="small: CI's run, about a minute; large: the 10,000-node cluster, "
            "under 10 minutes on 2 cores."
        ),
    ] = "small",
    seed: Annotated[int, typer.Option(min=0, help="Seed of the generated cluster and load.")] = 7,
    case: Annotated[
        list[str] | None,
        typer.Option("--case", help=f"Run this case only; repeatable. Cases: {', '.join(CASES)}."),
    ] = None,
    json_file: Annotated[
        Path | None, typer.Option("--json", help="Also write the figures to this file, as JSON.")
    ] = None,
    kafka: Annotated[
        str | None,
        typer.Option(
            "--kafka",
            metavar="HOST:PORT",
            help=f"Broker for the kafka and latency cases; default: ${KAFKA_ENV}, "
            "else they are not run.",
        ),
    ] = None,
) -> None:
    """Measure the pipeline's cases beside same-run baselines; print medians and ratios.

    Each case generates its input from --seed, runs once to warm up, then several times; the
    table gives the median, min and max, the baseline's median, their ratio, and the target.
    A missed target is printed, never an error: the exit status is non-zero only when a case
    could not run.
    """
    try:
        cases = chosen(case or [])
    except ValueError as exc:
        typer.echo(f"gpufrag: error: {exc}", err=True)
        raise typer.Exit(EXIT_USAGE) from None
    broker = kafka or os.environ.get(KAFKA_ENV) or None
    started = datetime.now(UTC)
    try:
        figures, case_s = run_cases(
            cases, scale=SCALES[scale], seed=seed, kafka=broker, err=Console(stderr=True)
        )
    except BenchError as exc:
        typer.echo(f"gpufrag: error: {exc}", err=True)
        raise typer.Exit(1) from None
    took = (datetime.now(UTC) - started).total_seconds()
    title = f"gpufrag bench --scale {scale} --seed {seed}: {len(figures)} figures in {took:.0f} s"
    out = Console()
    shown = out if out.is_terminal else Console(width=TABLE_WIDTH)
    print_report(figures, title=title, console=shown)
    shown.print("seconds per case: " + ", ".join(f"{k} {v:.0f}" for k, v in case_s.items()))
    if json_file is not None:
        meta = {
            "scale": scale,
            "seed": seed,
            "started": started.isoformat(),
            "took_s": took,
            "cases": [c.name for c in cases],
            "case_s": case_s,
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
        }
        write_json(json_file, figures, meta=meta)
