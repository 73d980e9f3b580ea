"""`gpufrag sink`: the distributed runner's history into the store: input events, profile
snapshots, per-instant cluster reports, signals, actions and dead letters."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import UTC, datetime
from typing import Annotated

import typer
from aiokafka import AIOKafkaConsumer
from prometheus_client import CollectorRegistry

from connectors.clickhouse.dsn import StoreError
from connectors.clickhouse.rows import Row
from connectors.clickhouse.sink import ClickHouseSink
from connectors.clickhouse.store import open_store
from models import StoreSettings
from streams.app.bus import Bus
from streams.app.errors import user_errors
from streams.app.history import open_history, store_settings
from streams.app.options import BootstrapOption, MetricsPortOption, PrefixOption, StoreOption
from streams.app.probes import Health, serve_health_or_exit
from streams.app.runs import run_row
from streams.app.stopping import stop_event
from streams.app.stored_summary import stored_summary
from streams.app.topic_sink import sink_topics, topic_sink


def sink(
    bootstrap: BootstrapOption = None,
    prefix: PrefixOption = None,
    store: StoreOption = None,
    group: Annotated[
        str, typer.Option(help="Consumer group (after the prefix); sinks in one group share work.")
    ] = "gpufrag-sink",
    run_id: Annotated[
        str, typer.Option(help="Run id the rows are stored under (what `gpufrag sql` selects).")
    ] = "live",
    duration_s: Annotated[
        float | None, typer.Option(min=0.1, help="Stop after this many seconds; default: Ctrl-C.")
    ] = None,
    metrics_port: MetricsPortOption = None,
) -> None:
    """Store the distributed runner's history: input events, profile snapshots, cluster
    fragmentation and pending explanations per instant, signals, actions and dead letters. One
    sink per chDB store; against a ClickHouse server, start several with the same --group to
    split the partitions."""
    bus = Bus.resolve(bootstrap, prefix)
    settings = store_settings(store)
    registry, health = CollectorRegistry(), Health()
    serve_health_or_exit(metrics_port, addr="0.0.0.0", registry=registry, health=health)
    with user_errors():
        counts = asyncio.run(
            _run(bus, settings, group=group, run_id=run_id, duration_s=duration_s, health=health)
        )
    typer.echo(
        f"stored {counts['events']} events, {counts['node_profiles']} node and "
        f"{counts['task_profiles']} task profile snapshots, {counts['cluster_reports']} cluster "
        f"reports, {counts['signals']} signals ({counts['repeats']} repeats dropped), "
        f"{counts['actions']} action records and "
        f"{counts['dead_letters']} dead letters from {bus.bootstrap} into {settings.dsn}, "
        f"run {run_id!r}"
    )


def _run_row(
    run_id: str,
    bus: Bus,
    group: str,
    *,
    status: str,
    started: datetime,
    summary: dict[str, object] | None = None,
) -> Row:
    return run_row(
        run_id,
        status=status,
        started=started,
        source=f"distributed:kafka:{bus.bootstrap}/{bus.prefix}",
        mode="distributed",  # the Faust workers' history, not the embedded runner's
        policy="",
        seed=0,
        params={"group": group},
        summary=summary or {},
    )


async def _run(
    bus: Bus,
    settings: StoreSettings,
    *,
    group: str,
    run_id: str,
    duration_s: float | None,
    health: Health,
) -> dict[str, int]:
    await bus.ensure_topics()
    history = await asyncio.to_thread(open_history, settings)
    started = datetime.now(UTC)
    await asyncio.to_thread(
        history.insert, "runs", [_run_row(run_id, bus, group, status="running", started=started)]
    )
    rows = ClickHouseSink(lambda: open_store(settings), settings)
    await rows.start()
    consumer = AIOKafkaConsumer(
        *sink_topics(bus.prefix),
        bootstrap_servers=bus.bootstrap,
        group_id=f"{bus.prefix}{group}",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    await consumer.start()
    out = topic_sink(bus.prefix, consumer=consumer, sink=rows, run_id=run_id)
    health.require("store writable", lambda: rows.writable)
    health.require("partitions assigned", lambda: bool(consumer.assignment()))
    beat = asyncio.create_task(health.heartbeat())
    try:
        with stop_event(duration_s) as stop:
            await out.run(stop)
    finally:
        beat.cancel()
        with contextlib.suppress(Exception):  # offsets not committed: read again next time
            await consumer.stop()
        await rows.stop()
        counts = {**out.counts, **(out.history.counts if out.history else {})}
        try:
            summary = await asyncio.to_thread(stored_summary, history, run_id)
            summary["stored_by_this_sink"] = counts
            status = "finished"
            if rows.fatal is not None:  # the disk is full: its line says what was kept
                status, summary["error"] = "failed", str(rows.fatal)
            end = _run_row(run_id, bus, group, status=status, started=started, summary=summary)
            await asyncio.to_thread(history.insert, "runs", [end])
        except StoreError:
            if rows.fatal is None:
                raise
        finally:
            await asyncio.to_thread(history.close)
    if rows.fatal is not None:
        raise rows.fatal
    return counts
