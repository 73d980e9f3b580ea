"""`gpufrag worker`: a Faust worker of the distributed runner."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Annotated

import faust
import typer

from connectors.kafka.security import faust_credentials
from connectors.trace.alibaba_csv import read_pods
from streams.app.console.errors import user_errors
from streams.app.console.options import BootstrapOption, MetricsPortOption, PrefixOption
from streams.app.lifecycle.bus import Bus
from streams.app.lifecycle.session import Session
from streams.app.lifecycle.worker_state import check_state_schema
from streams.app.replaying.workload import pod_shape
from streams.app.sinks.domain_metrics import domain_metrics_for
from streams.distributed.app import WorkerConfig, build_app
from streams.distributed.worker_metrics import WorkerCollector
from streams.fragmentation.shapes import TypicalPods


def worker(
    bootstrap: BootstrapOption = None,
    prefix: PrefixOption = None,
    app_id: Annotated[
        str,
        typer.Option(help="Consumer group and table namespace; workers with one id share work."),
    ] = "gpufrag",
    typical_from: Annotated[
        Path | None,
        typer.Option(help="Pod list CSV whose shapes are the expected workload (else learned)."),
    ] = None,
    datadir: Annotated[
        Path | None, typer.Option(help="Worker data directory; default a fresh temporary one.")
    ] = None,
    loglevel: Annotated[str, typer.Option(help="Log level.")] = "warning",
    metrics_port: MetricsPortOption = None,
) -> None:
    """Run one worker: profile join per pod and per node, and the cluster view, over Kafka.
    Start several with the same --app-id to split the partitions between them."""
    session = Session("worker")
    settings = session.settings
    bus = Bus.resolve(bootstrap, prefix)
    with user_errors():
        typical = None
        if typical_from is not None:
            typical = TypicalPods.from_shapes(
                (pod_shape(p) for p in read_pods(typical_from, settings=settings.trace)),
                coverage=settings.analysis.coverage,
            )
        asyncio.run(bus.ensure_topics(app_id=app_id))
        # an older layout is migrated or refused here, in one line: never read as empty
        asyncio.run(check_state_schema(bus.kafka, app_id))
        credentials = faust_credentials(bus.kafka)
    cfg = WorkerConfig(
        app_id=app_id,
        bootstrap=bus.bootstrap,
        credentials=credentials,
        prefix=bus.prefix,
        replication=bus.kafka.replication,
        datadir=str(datadir or Path(tempfile.mkdtemp(prefix="gpufrag-worker-"))),
        pipeline=session.pipeline(typical=typical),
        max_source_lag_s=settings.kafka.max_source_lag_s,
        # the cluster stage's reports as gauges: on the worker that holds its partition
        observe=domain_metrics_for(session.registry).observe,
    )
    app, stats = build_app(cfg)
    session.registry.register(
        WorkerCollector(counters=stats.counters, held=stats.held, lag=stats.lag)
    )
    # Faust runs the loop: /livez answers while the process serves
    session.health.require("partitions assigned", lambda: bool(app.consumer.assignment()))
    session.serve_probes(metrics_port, addr="0.0.0.0")
    faust.Worker(app, loglevel=loglevel).execute_from_commandline()
