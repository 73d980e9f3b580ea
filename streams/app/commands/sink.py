"""`gpufrag sink`: the distributed runner's history into the store: input events, profile
snapshots, per-instant cluster reports, signals, actions and dead letters."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Annotated

import typer
from aiokafka import AIOKafkaConsumer

from connectors.clickhouse.dsn import StoreError
from connectors.kafka.security import client_kwargs
from streams.app.console.errors import user_errors
from streams.app.console.options import (
    BootstrapOption,
    MetricsPortOption,
    PrefixOption,
    StoreOption,
)
from streams.app.lifecycle.bus import Bus
from streams.app.lifecycle.run_record import RunSpec, status_of
from streams.app.lifecycle.run_writers import RunWriters
from streams.app.lifecycle.session import Session
from streams.app.lifecycle.stopping import stop_event
from streams.app.queries.stored_summary import stored_summary
from streams.app.sinks.topic_sink import sink_topics, topic_sink


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
    session = Session("sink", store=store)
    session.serve_probes(metrics_port, addr="0.0.0.0")
    with user_errors():
        counts = asyncio.run(_run(bus, session, group=group, run_id=run_id, duration_s=duration_s))
    typer.echo(
        f"stored {counts['events']} events, {counts['node_profiles']} node and "
        f"{counts['task_profiles']} task profile snapshots, {counts['task_memory_peaks']} memory "
        f"peaks, {counts['cluster_reports']} cluster "
        f"reports, {counts['signals']} signals ({counts['repeats']} repeats dropped), "
        f"{counts['actions']} action records and "
        f"{counts['dead_letters']} dead letters from {bus.bootstrap} into {session.store.dsn}, "
        f"run {run_id!r}"
    )


async def _run(
    bus: Bus, session: Session, *, group: str, run_id: str, duration_s: float | None
) -> dict[str, int]:
    await bus.ensure_topics()
    info = RunSpec(
        run_id=run_id,
        source=f"distributed:kafka:{bus.bootstrap}/{bus.prefix}",
        mode="distributed",  # the Faust workers' history, not the embedded runner's
        params={"group": group},
    )
    async with session.recorded(info) as (record, rows):
        writers = RunWriters(record.store, run_id)
        await writers.join()
        beating = asyncio.create_task(writers.beat())
        consumer = AIOKafkaConsumer(
            *sink_topics(bus.prefix),
            **client_kwargs(bus.kafka),
            group_id=f"{bus.prefix}{group}",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        await consumer.start()
        out = topic_sink(bus.prefix, consumer=consumer, sink=rows, run_id=run_id)
        session.health.require("partitions assigned", lambda: bool(consumer.assignment()))
        session.require_store(rows)
        try:
            with stop_event(duration_s) as stop:
                await out.run(stop)
        finally:
            with contextlib.suppress(Exception):  # offsets not committed: read again next time
                await consumer.stop()
            await rows.stop()
            beating.cancel()
            counts = {**out.counts, **(out.history.counts if out.history else {})}
            summary: dict[str, object] = {}
            others: list[str] = []
            try:
                others = await writers.leave(counts)
                summary = await asyncio.to_thread(stored_summary, record.store, run_id)
            except StoreError:
                if rows.fatal is None:
                    raise
            summary["stored_by_this_sink"] = counts
            status = status_of(rows.fatal)
            if others and rows.fatal is None:
                # the run ends with the last of its sinks: the others still store their share
                status, summary["still_storing"] = "running", others
            await record.end(
                status,
                summary,
                failure=rows.fatal,
                store_trouble=rows.fatal is not None,
            )
    if rows.fatal is not None:
        raise rows.fatal
    return counts
