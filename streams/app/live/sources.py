"""The live sources `gpufrag watch` runs, how each is supervised, and their live stages.

A source is built once (its metrics register once) and run again if it fails; every source
sends through a live stage (``connectors.live_stage``) that puts its events in event-time order
and reports its progress every second.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from prometheus_client import CollectorRegistry

from connectors.dcgm import Endpoint
from connectors.dcgm.kube_discovery import KubeExporterDiscovery
from connectors.dcgm.scraper import DcgmScraper
from connectors.gpu.podresources import kubelet_assignments
from connectors.gpu.sampler import NvmlSampler
from connectors.kube import KubeSource, api_client_for
from connectors.live_stage import Emit, LiveMetrics, LiveStage, Outlet
from connectors.refusals import RefusalLog
from models import EventKind, GpufragSettings
from models.settings import WatchSettings
from streams.app.probes import Health

log = logging.getLogger(__name__)

KUBE_KINDS = (EventKind.POD, EventKind.NODE, EventKind.SCHEDULER, EventKind.QUEUE)
GPU_KINDS = (EventKind.GPU_SAMPLE,)
RESTART_INITIAL_S = 1.0
RESTART_MAX_S = 60.0


class Runnable(Protocol):
    async def run(self, *, stop: asyncio.Event) -> None: ...


@dataclass(frozen=True, slots=True)
class LiveSource:
    name: str
    """Its publisher's name in progress reports and its metrics label: one per process."""
    kinds: tuple[EventKind, ...]
    """What it publishes: the workers wait for its progress on these kinds' topics only."""
    build: Callable[[Emit], Runnable]


@dataclass(frozen=True, slots=True)
class SourcePlan:
    kube: bool
    dcgm: tuple[str, ...]
    nvml_node: str | None
    dcgm_discover: bool = False


async def build_sources(
    plan: SourcePlan,
    settings: GpufragSettings,
    registry: CollectorRegistry,
    stack: contextlib.AsyncExitStack,
    *,
    refusals: RefusalLog,
) -> list[LiveSource]:
    """The enabled sources, each built once (their metrics register once) and run again by
    ``_supervise`` if it fails; each refuses what it cannot pass on through ``refusals``."""
    host = socket.gethostname()
    out: list[LiveSource] = []
    client: Any = None
    if plan.kube:
        client = await api_client_for(settings.kube)
        stack.push_async_callback(client.close)
        kube = settings.kube

        def kube_source(emit: Emit) -> Runnable:
            return KubeSource(
                api_client=client, settings=kube, emit=emit, registry=registry, refusals=refusals
            )

        out.append(LiveSource(f"{kube.source}@{host}", KUBE_KINDS, kube_source))
    if plan.dcgm or plan.dcgm_discover:
        d = settings.dcgm
        discovery: KubeExporterDiscovery | None = None
        if plan.dcgm_discover:
            lister = client  # the watchers' API client when they run, else one of its own
            if lister is None:
                lister = await api_client_for(settings.kube)
                stack.push_async_callback(lister.close)
            discovery = KubeExporterDiscovery(
                api_client=lister,
                label_selector=d.discover_selector,
                namespace=d.discover_namespace,
                fallback_port=d.discover_port,
                request_timeout_s=settings.kube.request_timeout_s,
                page_size=settings.kube.page_size,
            )

        def dcgm_source(emit: Emit) -> Runnable:
            return DcgmScraper(
                endpoints=[Endpoint(url) for url in plan.dcgm],
                discovery=discovery,
                discovery_interval_s=d.discover_interval_s,
                emit=emit,
                registry=registry,
                refusals=refusals,
                interval_s=d.interval_s,
                timeout_s=d.timeout_s,
                backoff_initial_s=d.backoff_initial_s,
                backoff_max_s=max(d.backoff_max_s, d.backoff_initial_s),
                max_body_bytes=d.max_page_bytes,
                min_timestamp=d.min_timestamp,
            )

        out.append(LiveSource(f"dcgm@{host}", GPU_KINDS, dcgm_source))
    if plan.nvml_node is not None:
        node, nv = plan.nvml_node, settings.nvml

        def nvml_source(emit: Emit) -> Runnable:
            return NvmlSampler(
                node=node,
                interval_s=nv.interval_s,
                on_no_gpu="idle",
                emit=emit,
                refusals=refusals,
                pod_resources=kubelet_assignments(nv),
            )

        out.append(LiveSource(f"nvml@{node}", GPU_KINDS, nvml_source))
    return out


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
