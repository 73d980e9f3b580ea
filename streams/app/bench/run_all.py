"""All the chosen cases, one after the other, each in a folder of its own, under one progress
bar on stderr."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from streams.app.bench.figures import Figure
from streams.app.bench.registry import Case
from streams.app.bench.runner import BenchError, Context, Scale


def _stepper(progress: Progress, task: TaskID, case: str) -> Callable[[str], None]:
    def step(what: str) -> None:
        progress.update(task, description=f"{case} | {what}")

    return step


def run_cases(
    cases: Sequence[Case], *, scale: Scale, seed: int, kafka: str | None, err: Console
) -> tuple[list[Figure], dict[str, float]]:
    """Every figure of ``cases``, in order, and each case's wall seconds (setup included: what
    sizes a scale); a case's BenchError goes to the caller."""
    figures: list[Figure] = []
    took: dict[str, float] = {}
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} cases"),
        TimeElapsedColumn(),
    )
    with (
        tempfile.TemporaryDirectory(prefix="gpufrag-bench-") as work,
        Progress(*columns, console=err, transient=True, disable=not err.is_terminal) as progress,
    ):
        task = progress.add_task("bench", total=len(cases))
        for case in cases:
            ctx = Context(
                scale=scale,
                seed=seed,
                workdir=Path(work) / case.name,
                kafka=kafka,
                step=_stepper(progress, task, case.name),
            )
            ctx.workdir.mkdir()
            start = time.perf_counter()
            try:
                figures += case.load()(ctx)
            except BenchError as exc:
                raise BenchError(f"case {case.name}: {exc}") from exc
            took[case.name] = time.perf_counter() - start
            progress.advance(task)
    return figures, took
