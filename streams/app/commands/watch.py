"""`gpufrag watch`: run the live sources (Kubernetes watchers, dcgm-exporter scraper, NVML
sampler, and any a plugin registers) and send their events to the bus until stopped.

Each source sends through a live stage (``connectors.live_stage``) that puts its events in
event-time order and reports its progress every second; on Kafka each source is its own
publisher, so one slow source's order never constrains another's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated

import typer
from aiokafka.errors import KafkaError
from rich.console import Console

from streams.app.console.errors import EXIT_USAGE, user_errors
from streams.app.console.options import (
    BootstrapOption,
    LogLevelOption,
    MetricsAddrOption,
    MetricsPortOption,
    PrefixOption,
    UntilStoppedOption,
)
from streams.app.lifecycle.bus import Bus
from streams.app.lifecycle.log_setup import configure_logging
from streams.app.lifecycle.session import Session
from streams.app.sinks.alert_feed import alert_sinks

if TYPE_CHECKING:
    from streams.app.live.sources import SourcePlan

log = logging.getLogger(__name__)


class BusKind(StrEnum):
    KAFKA = "kafka"
    EMBEDDED = "embedded"


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
    source: Annotated[
        list[str] | None,
        typer.Option(
            "--source",
            metavar="NAME",
            help="Also run this registered live source (repeatable), e.g. one a plugin "
            "(GPUFRAG_PLUGINS) adds; adds to GPUFRAG_WATCH__SOURCES.",
        ),
    ] = None,
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
    alerts: Annotated[
        bool,
        typer.Option(
            "--alerts/--no-alerts",
            help="--bus embedded: send signals to the alert sinks (GPUFRAG_ALERTS__*) as they "
            "are emitted; with --bus kafka, run `gpufrag alert` instead.",
        ),
    ] = False,
    metrics_port: MetricsPortOption = None,
    metrics_addr: MetricsAddrOption = "0.0.0.0",
    duration_s: UntilStoppedOption = None,
    loglevel: LogLevelOption = "warning",
) -> None:
    """Run the live sources and send their events to the bus until stopped.

    Each source's events are held for GPUFRAG_WATCH__ALLOWED_DELAY_S (2 s) and sent in
    event-time order, with a progress report every second. A source whose endpoint is down is
    retried, counted and logged; it never stops the others. On SIGINT/SIGTERM (or after
    --duration-s) the sources stop, what they emitted is sent, and progress is reported a last
    time.
    """
    configure_logging(loglevel)
    session = Session("watch", store=store)
    settings = session.settings
    urls = tuple(dict.fromkeys((*settings.dcgm.endpoints, *(dcgm or ()))))
    discover = settings.dcgm.discover if dcgm_discover is None else dcgm_discover
    kind = bus or BusKind(settings.watch.bus)
    if kind is BusKind.KAFKA and store is not None:
        raise typer.BadParameter("--store is for --bus embedded", param_hint="--store")
    if alerts and kind is BusKind.KAFKA:
        raise typer.BadParameter(
            "--alerts is for --bus embedded; `gpufrag alert` sends the workers' signals",
            param_hint="--alerts",
        )
    if alerts:
        alert_sinks(settings.alerts)  # none, or an unknown one: refused before anything starts
    # the sources' libraries (kubernetes-asyncio, grpc) load when watch runs, not with every
    # other command
    from kubernetes_asyncio.config import ConfigException

    from streams.app.live.sources import SourcePlan

    plan = SourcePlan.of(
        kube=kube,
        dcgm=urls,
        dcgm_discover=discover,
        nvml_node=(node or settings.nvml.node or socket.gethostname()) if nvml else None,
        named=(*settings.watch.sources, *(source or ())),
    )
    session.serve_probes(metrics_port, addr=metrics_addr)
    with user_errors():
        try:
            code = asyncio.run(
                _watch(
                    plan,
                    kind,
                    session=session,
                    kafka=Bus.resolve(bootstrap, prefix),
                    duration_s=duration_s,
                    alerts=alerts,
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


async def _watch(
    plan: SourcePlan,
    kind: BusKind,
    *,
    session: Session,
    kafka: Bus,
    duration_s: float | None,
    alerts: bool,
) -> int:
    from connectors.live_stage import LiveMetrics
    from connectors.refusals import RefusalLog
    from streams.app.lifecycle.collector import collector_policy
    from streams.app.live.sources import build_sources
    from streams.app.live.to_kafka import watch_to_kafka
    from streams.app.live.to_store import watch_to_store

    console = Console(stderr=True)
    stop = asyncio.Event()
    settings, registry = session.settings, session.registry
    async with contextlib.AsyncExitStack() as stack:
        refusals = RefusalLog(registry=registry)  # one per process: every source refuses here
        sources = await build_sources(plan, settings, registry, stack, refusals=refusals)
        names = ", ".join(s.name for s in sources)
        metrics = LiveMetrics(registry)
        if kind is BusKind.EMBEDDED:
            collector_policy()  # this process holds the cluster's state: see its module
            dsn = session.store.dsn
            console.print(f"watching {names} into {dsn}", highlight=False, soft_wrap=True)
            return await watch_to_store(
                sources,
                session=session,
                refusals=refusals,
                metrics=metrics,
                stop=stop,
                duration_s=duration_s,
                console=console,
                alerts=settings.alerts if alerts else None,
            )
        console.print(
            f"watching {names} onto {kafka.bootstrap} (prefix {kafka.prefix!r})",
            highlight=False,
            soft_wrap=True,
        )
        return await watch_to_kafka(
            sources,
            ws=settings.watch,
            bus=kafka,
            refusals=refusals,
            metrics=metrics,
            stop=stop,
            duration_s=duration_s,
            health=session.health,
        )
