"""`gpufrag watch`: run the live sources (Kubernetes watchers, dcgm-exporter scraper, NVML
sampler) and send their events to the bus until stopped.

Each source sends through a live stage (``connectors.kafka.live``) that puts its events in
event-time order and reports its progress every second; on Kafka each source is its own
publisher, so one slow source's order never constrains another's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, Protocol

import typer
from aiokafka.errors import KafkaError
from kubernetes_asyncio.config import ConfigException
from prometheus_client import CollectorRegistry, start_http_server
from rich.console import Console

from connectors.clickhouse.sink import ClickHouseSink
from connectors.clickhouse.store import open_store
from connectors.dcgm import DcgmScraper, Endpoint, KubeExporterDiscovery
from connectors.gpu.podresources import kubelet_assignments
from connectors.gpu.sampler import NvmlSampler
from connectors.kafka.live import Emit, LiveMetrics, LiveStage, LiveStream, PublisherOutlet
from connectors.kafka.publisher import EventPublisher
from connectors.kube import KubeSource, api_client_for
from models import EventKind, GpufragSettings, StoreSettings
from models.settings import WatchSettings
from streams.app.bus import Bus
from streams.app.errors import EXIT_USAGE, user_errors
from streams.app.history import open_history, store_settings
from streams.app.options import BootstrapOption, PrefixOption
from streams.app.runs import StoreInterrupts, run_row
from streams.app.store_output import StoreOutput
from streams.distributed import topics
from streams.fragmentation.analysis import FragmentationAnalysis
from streams.runner.embedded import EmbeddedRunner

log = logging.getLogger(__name__)

KUBE_KINDS = (EventKind.POD, EventKind.NODE, EventKind.SCHEDULER, EventKind.QUEUE)
GPU_KINDS = (EventKind.GPU_SAMPLE,)
RESTART_INITIAL_S = 1.0
RESTART_MAX_S = 60.0


class BusKind(StrEnum):
    KAFKA = "kafka"
    EMBEDDED = "embedded"


class _Runnable(Protocol):
    async def run(self, *, stop: asyncio.Event) -> None: ...


@dataclass(frozen=True, slots=True)
class LiveSource:
    name: str
    """Its publisher's name in progress reports and its metrics label: one per process."""
    kinds: tuple[EventKind, ...]
    """What it publishes: the workers wait for its progress on these kinds' topics only."""
    build: Callable[[Emit], _Runnable]


def watch(
    kube: Annotated[
        bool,
        typer.Option(
            "--kube/--no-kube", help="Watch Kubernetes (the kube settings: GPUFRAG_KUBE__*)."
        ),
    ] = True,
    dcgm: Annotated[
        list[str] | None,
        typer.Option(
            "--dcgm",
            metavar="URL",
            help="A dcgm-exporter page to scrape (repeatable); adds to GPUFRAG_DCGM__ENDPOINTS.",
        ),
    ] = None,
    dcgm_discover: Annotated[
        bool | None,
        typer.Option(
            "--dcgm-discover/--no-dcgm-discover",
            help="Also scrape the dcgm-exporter pods found through the Kubernetes API "
            "(GPUFRAG_DCGM__DISCOVER_*); default GPUFRAG_DCGM__DISCOVER (off).",
        ),
    ] = None,
    nvml: Annotated[
        bool, typer.Option("--nvml/--no-nvml", help="Sample this machine's GPUs through NVML.")
    ] = False,
    node: Annotated[
        str | None,
        typer.Option(help="Node name of the NVML samples; default GPUFRAG_NVML__NODE, else host."),
    ] = None,
    bus: Annotated[
        BusKind | None,
        typer.Option(help="Where events go; default GPUFRAG_WATCH__BUS (kafka)."),
    ] = None,
    bootstrap: BootstrapOption = None,
    prefix: PrefixOption = None,
    store: Annotated[
        str | None,
        typer.Option(
            help="--bus embedded: history store DSN (chdb:///path or http(s)://host:8123); "
            "default GPUFRAG_STORE__DSN, else a chDB store under the user's data directory."
        ),
    ] = None,
    metrics_port: Annotated[
        int | None,
        typer.Option(min=1, max=65535, help="Serve Prometheus metrics on this port."),
    ] = None,
    metrics_addr: Annotated[
        str, typer.Option(help="Address the metrics server listens on.")
    ] = "0.0.0.0",
    duration_s: Annotated[
        float | None,
        typer.Option(min=0.0, help="Stop after this many seconds; default: until SIGINT/SIGTERM."),
    ] = None,
    loglevel: Annotated[str, typer.Option(help="Log level (stderr).")] = "warning",
) -> None:
    """Run the live sources and send their events to the bus until stopped.

    Each source's events are held for GPUFRAG_WATCH__ALLOWED_DELAY_S (2 s) and sent in
    event-time order, with a progress report every second. A source whose endpoint is down is
    retried, counted and logged; it never stops the others. On SIGINT/SIGTERM (or after
    --duration-s) the sources stop, what they emitted is sent, and progress is reported a last
    time.
    """
    logging.basicConfig(
        level=loglevel.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    settings = GpufragSettings()
    urls = tuple(dict.fromkeys((*settings.dcgm.endpoints, *(dcgm or ()))))
    discover = settings.dcgm.discover if dcgm_discover is None else dcgm_discover
    if not (kube or urls or discover or nvml):
        raise typer.BadParameter("no source: give --kube, --dcgm URL, --dcgm-discover or --nvml")
    kind = bus or BusKind(settings.watch.bus)
    if kind is BusKind.KAFKA and store is not None:
        raise typer.BadParameter("--store is for --bus embedded", param_hint="--store")
    plan = _Plan(
        kube=kube,
        dcgm=urls,
        dcgm_discover=discover,
        nvml_node=(node or settings.nvml.node or socket.gethostname()) if nvml else None,
    )
    registry = CollectorRegistry()
    if metrics_port is not None:
        try:
            start_http_server(metrics_port, addr=metrics_addr, registry=registry)
        except OSError as exc:
            typer.echo(f"gpufrag: error: metrics port {metrics_port}: {exc.strerror}", err=True)
            raise typer.Exit(EXIT_USAGE) from None
    with user_errors():
        try:
            code = asyncio.run(
                _watch(
                    plan,
                    kind,
                    settings=settings,
                    kafka=Bus.resolve(bootstrap, prefix),
                    store=store_settings(store) if kind is BusKind.EMBEDDED else None,
                    registry=registry,
                    duration_s=duration_s,
                )
            )
        except ConfigException as exc:
            typer.echo(
                f"gpufrag: error: no Kubernetes configuration ({exc}); set "
                "GPUFRAG_KUBE__KUBECONFIG, or "
                + ("--no-kube --no-dcgm-discover" if plan.dcgm_discover else "--no-kube"),
                err=True,
            )
            raise typer.Exit(EXIT_USAGE) from None
        except KafkaError as exc:
            typer.echo(f"gpufrag: error: Kafka: {exc}", err=True)
            raise typer.Exit(1) from None
    raise typer.Exit(code)


@dataclass(frozen=True, slots=True)
class _Plan:
    kube: bool
    dcgm: tuple[str, ...]
    nvml_node: str | None
    dcgm_discover: bool = False


async def _watch(
    plan: _Plan,
    kind: BusKind,
    *,
    settings: GpufragSettings,
    kafka: Bus,
    store: StoreSettings | None,
    registry: CollectorRegistry,
    duration_s: float | None,
) -> int:
    console = Console(stderr=True)
    stop = asyncio.Event()
    async with contextlib.AsyncExitStack() as stack:
        sources = await _sources(plan, settings, registry, stack)
        names = ", ".join(s.name for s in sources)
        metrics = LiveMetrics(registry)
        if store is not None:
            console.print(f"watching {names} into {store.dsn}", highlight=False, soft_wrap=True)
            return await _embedded(
                sources,
                settings=settings,
                store=store,
                registry=registry,
                metrics=metrics,
                stop=stop,
                duration_s=duration_s,
                console=console,
            )
        console.print(
            f"watching {names} onto {kafka.bootstrap} (prefix {kafka.prefix!r})",
            highlight=False,
            soft_wrap=True,
        )
        return await _kafka(
            sources, ws=settings.watch, bus=kafka, metrics=metrics, stop=stop, duration_s=duration_s
        )


async def _sources(
    plan: _Plan,
    settings: GpufragSettings,
    registry: CollectorRegistry,
    stack: contextlib.AsyncExitStack,
) -> list[LiveSource]:
    """The enabled sources, each built once (their metrics register once) and run again by
    ``_supervise`` if it fails."""
    host = socket.gethostname()
    out: list[LiveSource] = []
    client: Any = None
    if plan.kube:
        client = await api_client_for(settings.kube)
        stack.push_async_callback(client.close)
        kube = settings.kube

        def kube_source(emit: Emit) -> _Runnable:
            return KubeSource(api_client=client, settings=kube, emit=emit, registry=registry)

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

        def dcgm_source(emit: Emit) -> _Runnable:
            return DcgmScraper(
                endpoints=[Endpoint(url) for url in plan.dcgm],
                discovery=discovery,
                discovery_interval_s=d.discover_interval_s,
                emit=emit,
                registry=registry,
                interval_s=d.interval_s,
                timeout_s=d.timeout_s,
                backoff_initial_s=d.backoff_initial_s,
                backoff_max_s=max(d.backoff_max_s, d.backoff_initial_s),
            )

        out.append(LiveSource(f"dcgm@{host}", GPU_KINDS, dcgm_source))
    if plan.nvml_node is not None:
        node, nv = plan.nvml_node, settings.nvml

        def nvml_source(emit: Emit) -> _Runnable:
            return NvmlSampler(
                node=node,
                interval_s=nv.interval_s,
                on_no_gpu="idle",
                emit=emit,
                pod_resources=kubelet_assignments(nv),
            )

        out.append(LiveSource(f"nvml@{node}", GPU_KINDS, nvml_source))
    return out


async def _supervise(
    name: str, source: _Runnable, *, stop: asyncio.Event, metrics: LiveMetrics
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


async def _run_live(
    runs: list[tuple[str, _Runnable]],
    stages: list[LiveStage],
    *,
    stop: asyncio.Event,
    metrics: LiveMetrics,
    duration_s: float | None,
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
    try:
        await asyncio.gather(
            *(_supervise(name, src, stop=stop, metrics=metrics) for name, src in runs)
        )
    except BaseException:
        for task in stage_tasks:
            task.cancel()
        await asyncio.gather(*stage_tasks, return_exceptions=True)
        raise
    done.set()
    await asyncio.gather(*stage_tasks)


def _stage(
    name: str, outlet: PublisherOutlet | LiveStream, metrics: LiveMetrics, ws: WatchSettings
) -> LiveStage:
    return LiveStage(
        name=name,
        outlet=outlet,
        metrics=metrics,
        allowed_delay_s=ws.allowed_delay_s,
        interval_s=ws.progress_interval_s,
        max_held=ws.max_held_events,
    )


async def _kafka(
    sources: list[LiveSource],
    *,
    ws: WatchSettings,
    bus: Bus,
    metrics: LiveMetrics,
    stop: asyncio.Event,
    duration_s: float | None,
) -> int:
    """One publisher and live stage per source. SIGINT/SIGTERM stop cleanly; a second one
    gives up on what is not sent yet."""
    await bus.ensure_topics()
    outlets: list[PublisherOutlet] = []
    stages: list[LiveStage] = []
    runs: list[tuple[str, _Runnable]] = []
    for src in sources:
        topic_of = {k.value: topics.INPUT_BY_KIND[k].full_name(bus.prefix) for k in src.kinds}
        outlet = PublisherOutlet(
            EventPublisher(bus.bootstrap, topic_of=topic_of, source=src.name),
            bootstrap=bus.bootstrap,
        )
        stage = _stage(src.name, outlet, metrics, ws)
        outlets.append(outlet)
        stages.append(stage)
        runs.append((src.name, src.build(stage.emitter(src.name))))
    main = asyncio.current_task()
    loop = asyncio.get_running_loop()
    signals = [0]

    def on_signal() -> None:
        signals[0] += 1
        stop.set()
        if signals[0] == 2 and main is not None:
            main.cancel()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal)
    started: list[PublisherOutlet] = []
    wall0 = time.monotonic()
    try:
        try:
            for outlet in outlets:
                await outlet.start()
                started.append(outlet)
            await _run_live(runs, stages, stop=stop, metrics=metrics, duration_s=duration_s)
        finally:
            for outlet in started:  # flushes; a second signal cancels this too
                await outlet.stop()
    except asyncio.CancelledError:
        if signals[0] < 2:
            raise
        # the broker may be what hangs: do not wait for a flush either
        typer.echo("gpufrag: second interrupt: stopped without sending what was held", err=True)
        return 130
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
    elapsed = time.monotonic() - wall0
    for stage, outlet in zip(stages, outlets, strict=True):
        typer.echo(
            f"{stage.name}: {stage.sent} events sent ({stage.late} late), "
            f"{outlet.publisher.progress_sent} progress reports"
        )
    typer.echo(f"watched {elapsed:.1f} s; sent to {bus.bootstrap} (prefix {bus.prefix!r})")
    return 0


async def _embedded(
    sources: list[LiveSource],
    *,
    settings: GpufragSettings,
    store: StoreSettings,
    registry: CollectorRegistry,
    metrics: LiveMetrics,
    stop: asyncio.Event,
    duration_s: float | None,
    console: Console,
) -> int:
    """All sources through one live stage into the embedded pipeline (one stage: the merged
    stream must be in event-time order for the runner), stored as one run in the history."""
    history = await asyncio.to_thread(open_history, store)
    started = datetime.now(UTC)
    run_id = f"watch-{started:%Y%m%dT%H%M%SZ}-{socket.gethostname()}"
    names = [s.name for s in sources]
    ws = settings.watch
    params: dict[str, object] = {
        "sources": names,
        "allowed_delay_s": ws.allowed_delay_s,
        "progress_interval_s": ws.progress_interval_s,
    }

    def row(status: str, summary: dict[str, object]) -> dict[str, object]:
        return run_row(
            run_id,
            status=status,
            started=started,
            source="watch:" + ",".join(names),
            mode="live",
            policy="",
            seed=0,
            params=params,
            summary=summary,
        )

    await asyncio.to_thread(history.insert, "runs", [row("running", {})])
    sink = ClickHouseSink(lambda: open_store(store), store, registry=registry)
    await sink.start()
    output = StoreOutput(sink, run_id=run_id, track_arrivals=False)
    # a live cluster learns its expected workload from the pods it sees
    analysis = FragmentationAnalysis(settings=settings.analysis)
    stream = LiveStream()
    stage = _stage("embedded", stream, metrics, settings.watch)
    runs = [(s.name, s.build(stage.emitter(s.name))) for s in sources]
    runner = EmbeddedRunner(source=stream, output=output, analysis=analysis, registry=registry)

    async def live() -> None:
        try:
            await _run_live(runs, [stage], stop=stop, metrics=metrics, duration_s=duration_s)
        finally:
            stream.end()

    interrupts = StoreInterrupts(stop=stop.set, sink=sink, console=console)
    interrupts.install()
    wall0 = time.monotonic()
    failure: BaseException | None = None
    try:
        await _together(runner.run(), live())
    except Exception as exc:  # recorded on the run, then reported
        failure = exc
    finally:
        await interrupts.finish()
    if interrupts.forced:
        interrupts.report_forced()
        return 130
    summary: dict[str, object] = {
        "events": runner.processed,
        "failed_events": runner.failures,
        "late_events": stage.late,
        "elapsed_s": round(time.monotonic() - wall0, 2),
    }
    if failure is not None:
        summary["error"] = f"{type(failure).__name__}: {failure}"
    status = "failed" if failure is not None else "finished"
    await asyncio.to_thread(history.insert, "runs", [row(status, summary)])
    await asyncio.to_thread(history.close)
    if failure is not None:
        raise failure
    typer.echo(
        f"run {run_id} ({status}): {runner.processed} events stored into {store.dsn} "
        f"({stage.late} late, {runner.failures} failed)"
    )
    return 0


async def _together(pipeline: Coroutine[Any, Any, None], live: Coroutine[Any, Any, None]) -> None:
    """The pipeline and its live input side by side. The input ends the stream when it stops
    (cleanly or not) and the pipeline drains it; a pipeline that fails stops the input, since
    nothing would take its events any more."""
    run_task = asyncio.create_task(pipeline, name="pipeline")
    live_task = asyncio.create_task(live, name="live sources")
    try:
        done, _ = await asyncio.wait((run_task, live_task), return_when=asyncio.FIRST_EXCEPTION)
        if live_task not in done:
            live_task.cancel()
            await asyncio.gather(live_task, return_exceptions=True)
            run_task.result()
            return
        await run_task
        live_task.result()
    finally:
        for task in (run_task, live_task):
            task.cancel()
