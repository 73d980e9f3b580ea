"""Running a case: its scale, warm-up runs, timed runs, and what the progress bar shows."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from streams.app.bench.figures import Samples


class BenchError(RuntimeError):
    """A case that could not run (a command it starts failed): the bench stops with its text."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Scale:
    """Sizes of one scale. ``small`` runs in CI (about a minute on 2 busy cores); ``large`` is
    the issue's cluster (10,000 nodes, 80,000 GPUs) and stays under 10 minutes here."""

    name: str
    warmup: int
    runs: int
    trace_nodes: int | None
    """Nodes of the bundled trace `replay` and `experiment` use (None: all 1,213)."""
    replay_enforce: bool
    """Whether `replay` also times one `replay --actions enforce`. Not at the large scale:
    on the whole trace one run takes about 2.5 minutes, which with a broker's cases took the
    large run to 11.6 minutes (its bound is 10); docs/performance.md times it by hand."""
    ingest_nodes: int
    ingest_events: int
    """Live events per timed run of `ingest` (after the cluster's first list)."""
    view_nodes: tuple[int, ...]
    view_pending: int
    view_changes: int
    inspect_nodes: int
    inspect_pods: int
    memory_nodes: int
    memory_pods: int
    sink_rows: int
    kafka_events: int
    latency_rate_per_s: int
    latency_s: float


SCALES: dict[str, Scale] = {
    "small": Scale(
        name="small",
        warmup=1,
        runs=3,
        trace_nodes=120,
        replay_enforce=True,
        ingest_nodes=500,
        ingest_events=1_500,
        view_nodes=(100, 1_000),
        view_pending=200,
        view_changes=500,
        inspect_nodes=200,
        inspect_pods=2_000,
        memory_nodes=1_000,
        memory_pods=20_000,
        sink_rows=10_000,
        kafka_events=5_000,
        latency_rate_per_s=1_000,
        latency_s=3.0,
    ),
    "large": Scale(
        name="large",
        warmup=1,
        runs=3,
        trace_nodes=None,
        replay_enforce=False,
        ingest_nodes=10_000,
        ingest_events=5_000,
        view_nodes=(1_000, 10_000),
        view_pending=2_000,
        view_changes=2_000,
        inspect_nodes=2_000,
        inspect_pods=20_000,
        memory_nodes=10_000,
        memory_pods=200_000,
        sink_rows=100_000,
        kafka_events=6_000,
        latency_rate_per_s=10_000,
        latency_s=0.5,
    ),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Context:
    scale: Scale
    seed: int
    workdir: Path
    """A folder of this run's own (stores, snapshots), removed after it."""
    kafka: str | None
    """The broker's bootstrap address; None: the Kafka cases are not run."""
    step: Callable[[str], None]
    """Says what runs now (the progress bar's line)."""


def measure(ctx: Context, label: str, sample: Callable[[], float]) -> Samples:
    """``ctx.scale.warmup`` untimed calls of ``sample``, then ``ctx.scale.runs`` timed ones.
    ``sample`` returns its own figure (seconds, a rate, MiB), so a case's setup between runs
    is never in it."""
    (samples,) = measure_each(ctx, label, lambda: (sample(),))
    return samples


def measure_each(
    ctx: Context,
    label: str,
    sample: Callable[[], tuple[float, ...]],
    *,
    warmup: int | None = None,
    runs: int | None = None,
) -> list[Samples]:
    """``measure`` for a sample that gives several figures at once (a process's wall time and
    its peak memory): one list of samples per figure, in the sample's order. ``warmup`` and
    ``runs`` override the scale's, for a case too long to repeat as often."""
    warmup = ctx.scale.warmup if warmup is None else warmup
    runs = ctx.scale.runs if runs is None else runs
    for _ in range(warmup):
        ctx.step(f"{label}: warm-up")
        sample()
    values: list[tuple[float, ...]] = []
    for i in range(runs):
        ctx.step(f"{label}: run {i + 1}/{runs}")
        values.append(sample())
    return [Samples(tuple(column)) for column in zip(*values, strict=True)]
