"""`gpufrag publish`: put a trace replay, or a file of events, onto the Kafka input topics, so
the distributed runner can be driven without a cluster."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError

from connectors.kafka.publisher import EventPublisher
from connectors.trace.alibaba_csv import read_nodes, read_pods
from connectors.trace.bundled import bundled_nodes_path, bundled_pods_path
from models import Envelope, from_json
from streams.app.commands.replay import MAX_INJECTED_STORMS
from streams.app.console.errors import user_errors
from streams.app.console.options import BootstrapOption, NodesOption, PodsOption, PrefixOption
from streams.app.lifecycle.bus import Bus
from streams.app.lifecycle.log_setup import configure_logging
from streams.app.lifecycle.settings_load import load_settings
from streams.distributed import topics
from streams.simulation.cluster import (
    ReplayOptions,
    SimulatedCluster,
    TraceMode,
    TraceReplayError,
)


def read_events(path: Path, rejected: list[str]) -> Iterator[Envelope]:
    """Envelopes from a JSON-lines file; a bad line is reported with its number and skipped."""
    with path.open("rb") as fh:
        for n, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                yield from_json(Envelope, line)
            except (ValidationError, ValueError) as exc:
                first = str(exc).splitlines()[0]
                rejected.append(f"{path.name}:{n}: {first}")


def publish(
    file: Annotated[
        Path | None, typer.Option(help="JSON lines of event envelopes; default: a trace replay.")
    ] = None,
    nodes: NodesOption = None,
    pods: PodsOption = None,
    mode: Annotated[TraceMode, typer.Option(help="Replay mode (see gpufrag replay).")] = (
        TraceMode.FGD
    ),
    policy: Annotated[str, typer.Option(help="Placement policy of the replay.")] = "fgd",
    seed: Annotated[int, typer.Option(min=0, help="Seed of the replay.")] = 42,
    node_limit: Annotated[
        int | None, typer.Option(min=1, help="Use only the first N nodes of the trace.")
    ] = None,
    bootstrap: BootstrapOption = None,
    prefix: PrefixOption = None,
    rate: Annotated[
        float | None,
        typer.Option(min=0.1, help="Events per wall-clock second; default as fast as possible."),
    ] = None,
    inject_oom_storms: Annotated[
        int,
        typer.Option(
            min=0,
            max=MAX_INJECTED_STORMS,
            help="As gpufrag replay: add N scripted OOM storms and 3N background OOMs to the "
            "trace replay (not with --file); the workers' signals show them.",
        ),
    ] = 0,
) -> None:
    """Send events onto the input topics (created if missing), keyed for the workers. A broker
    that goes away for a while is waited out: a producer that takes nothing for two minutes is
    replaced (logged as a warning), and the command fails after ten without progress."""
    # the warnings (a producer replaced, aiokafka's own) with the time, to be read beside
    # the broker's log, and aiokafka's retry loop during an outage as one line per window
    configure_logging("warning")
    bus = Bus.resolve(bootstrap, prefix)
    rejected: list[str] = []
    with user_errors():
        if file is not None and inject_oom_storms:
            raise TraceReplayError("--inject-oom-storms adds to a trace replay, not to --file")
        if file is not None:
            # a file need not be in event-time order; the bus needs it in order (progress
            # reports promise that nothing earlier follows), so it is sorted first (stable)
            source: Iterator[Envelope] = iter(
                sorted(read_events(file, rejected), key=lambda e: e.event_time)
            )
        else:
            # the trace read and replayed as `gpufrag replay` does it: GPUFRAG_TRACE__* (its
            # start time and bounds) and the OOM storm thresholds injected storms are spaced for
            settings = load_settings()
            sim = SimulatedCluster(
                read_nodes(nodes or bundled_nodes_path(), settings=settings.trace),
                read_pods(pods or bundled_pods_path(), settings=settings.trace),
                trace=settings.trace,
                oom_storm=settings.detectors.oom_storm,
                options=ReplayOptions(
                    mode=mode,
                    policy=policy,
                    seed=seed,
                    node_limit=node_limit,
                    source=f"trace:{(pods or bundled_pods_path()).stem}",
                    inject_oom_storms=inject_oom_storms,
                ),
            )
            source = sim.events()
        sent, reports, resent = asyncio.run(_publish(bus, source, rate=rate))
    for line in rejected[:20]:
        typer.echo(f"gpufrag: rejected {line}", err=True)
    typer.echo(
        f"published {sent} events to {bus.bootstrap} (prefix {bus.prefix!r}); "
        f"rejected {len(rejected)}; progress reports {reports}"
        + (f"; {resent} records the broker refused sent again" if resent else "")
    )
    if rejected:
        raise typer.Exit(1)


async def _publish(
    bus: Bus, source: Iterator[Envelope], *, rate: float | None
) -> tuple[int, int, int]:
    await bus.ensure_topics()
    pub = EventPublisher(
        bus.kafka,
        topic_of={k.value: t.full_name(bus.prefix) for k, t in topics.INPUT_BY_KIND.items()},
    )
    await pub.start()
    try:
        loop = asyncio.get_running_loop()
        started = loop.time()
        for n, env in enumerate(source):
            if rate is not None:
                ahead_s = started + n / rate - loop.time()
                if ahead_s > 0:
                    await asyncio.sleep(ahead_s)
            await pub.publish(env)
        await pub.report_progress()
    finally:
        await pub.stop()
    return pub.sent, pub.progress_sent, pub.resent
