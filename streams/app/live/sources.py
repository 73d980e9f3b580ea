"""The live sources `gpufrag watch` runs, how each is supervised, and their live stages.

A source is built once (its metrics register once) and run again if it fails; every source
sends through a live stage (``connectors.live_stage``) that puts its events in event-time order
and reports its progress every second.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from prometheus_client import CollectorRegistry

from connectors.live_stage import LiveMetrics, LiveStage, Outlet
from connectors.refusals import RefusalLog
from models import GpufragSettings
from models.settings import WatchSettings
from streams.app.lifecycle.probes import Health
from streams.app.live import builtin_sources  # noqa: F401  (registers kube, dcgm, nvml)
from streams.app.live.source_registry import (
    LIVE_SOURCES,
    LiveSource,
    Runnable,
    SourceContext,
    SourcePlan,
)

__all__ = [
    "LiveSource",
    "Runnable",
    "SourcePlan",
    "build_sources",
    "live_stage",
    "require_listed",
    "run_live",
    "supervise",
]

log = logging.getLogger(__name__)

RESTART_INITIAL_S = 1.0
RESTART_MAX_S = 60.0


async def build_sources(
    plan: SourcePlan,
    settings: GpufragSettings,
    registry: CollectorRegistry,
    stack: contextlib.AsyncExitStack,
    *,
    refusals: RefusalLog,
) -> list[LiveSource]:
    """The plan's sources, in its order, each built once by its registered builder (their
    metrics register once) and run again by ``supervise`` if it fails; each refuses what it
    cannot pass on through ``refusals``."""
    ctx = SourceContext(
        plan=plan, settings=settings, registry=registry, refusals=refusals, stack=stack
    )
    return [await LIVE_SOURCES.get(name)(ctx) for name in plan.names]


async def supervise(
    name: str, source: Runnable, *, stop: asyncio.Event, metrics: LiveMetrics
) -> None:
    """Run a source until ``stop``. Sources retry their own outages; one that still fails (a
    bug, an NVML error) is counted, logged and restarted after a backoff, so it never takes
    the other sources down with it."""
    failures = 0
    while not stop.is_set():
        try:
            await source.run(stop=stop)
            return
        except Exception:
            failures += 1
            metrics.failures.labels(name).inc()
            log.exception("live source %s failed (%d times); restarting", name, failures)
        delay = min(RESTART_MAX_S, RESTART_INITIAL_S * 2.0 ** min(failures - 1, 30))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), delay)


async def run_live(
    runs: list[tuple[str, Runnable]],
    stages: list[LiveStage],
    *,
    stop: asyncio.Event,
    metrics: LiveMetrics,
    duration_s: float | None,
    health: Health | None = None,
) -> None:
    """The sources until ``stop`` (or for ``duration_s``, counted from here: opening a store
    takes a while), then the stages' last step, so that what a source emits while it shuts
    down is still sent. A stage that fails (its bus refused a send for minutes) stops the
    sources, and its error ends the watch."""
    if duration_s is not None:
        asyncio.get_running_loop().call_later(duration_s, stop.set)
    done = asyncio.Event()
    stage_tasks = [asyncio.create_task(s.run(until=done), name=f"live {s.name}") for s in stages]

    def on_stage_end(task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            stop.set()

    for task in stage_tasks:
        task.add_done_callback(on_stage_end)
    beat = asyncio.create_task(health.heartbeat()) if health is not None else None
    try:
        await asyncio.gather(
            *(supervise(name, src, stop=stop, metrics=metrics) for name, src in runs)
        )
    except BaseException:
        for task in stage_tasks:
            task.cancel()
        await asyncio.gather(*stage_tasks, return_exceptions=True)
        raise
    finally:
        if beat is not None:
            beat.cancel()
    done.set()
    await asyncio.gather(*stage_tasks)


def require_listed(health: Health | None, runs: list[tuple[str, Runnable]]) -> None:
    """Not ready until each source with a view to list (kube) has listed it once; registered
    before anything else is, so no probe reads "ready" in between."""
    for name, src in runs:
        listed = getattr(src, "listed", None)
        if health is not None and callable(listed):
            health.require(f"source {name} listed", listed)


def live_stage(name: str, outlet: Outlet, metrics: LiveMetrics, ws: WatchSettings) -> LiveStage:
    return LiveStage(
        name=name,
        outlet=outlet,
        metrics=metrics,
        allowed_delay_s=ws.allowed_delay_s,
        interval_s=ws.progress_interval_s,
        max_held=ws.max_held_events,
    )
