"""Scripted events through the embedded runner into a new chDB store, with the run recorded as
finished, so `gpufrag` commands read it as they read a real run's."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

from connectors.clickhouse.rows import Row
from connectors.clickhouse.sink import ClickHouseSink
from connectors.clickhouse.store import open_store
from models import Envelope, GpufragSettings, StoreSettings
from streams.app.lifecycle.history import open_history
from streams.app.lifecycle.runs import FINISHED, run_row
from streams.app.sinks.store_output import StoreOutput
from streams.pipeline import define_pipeline
from streams.runner.embedded import EmbeddedRunner
from streams.runner.fanout import Fanout
from tests.app.pipeline_helpers import dsn_for
from tests.kube_fake.objects import T0

__all__ = ["finished_run", "minute_apart", "stored_run"]


def minute_apart(steps: list[list[Envelope]]) -> list[Envelope]:
    """The steps one minute apart from ``T0`` (longer than the pending queue's evaluation
    interval), in source order."""
    out: list[Envelope] = []
    for n, step in enumerate(steps):
        at = T0 + timedelta(minutes=n)
        out += [
            env.model_copy(update={"event_time": at, "seq": len(out) + i})
            for i, env in enumerate(step)
        ]
    return out


async def _run_into(
    settings: StoreSettings, events: list[Envelope], run_id: str, config: GpufragSettings
) -> None:
    await asyncio.to_thread(lambda: open_history(settings).close())
    sink = ClickHouseSink(lambda: open_store(settings), settings)
    await sink.start()
    runner = EmbeddedRunner(
        source=iter(events),
        output=Fanout([StoreOutput(sink, run_id=run_id)]),
        pipeline=define_pipeline(config).build(),
    )
    await asyncio.wait_for(runner.run(), 120)
    await sink.stop()
    store = open_store(settings)
    try:
        store.insert("runs", [finished_run(run_id)])
    finally:
        store.close()


def finished_run(run_id: str) -> Row:
    """The ``runs`` row of a finished test run, which read commands take as the latest."""
    return run_row(
        run_id,
        status=FINISHED,
        started=datetime(2026, 1, 1, tzinfo=UTC),
        source="test",
        mode="live",
        policy="",
        seed=0,
        params={},
        summary={},
    )


def stored_run(
    tmp_path: Path,
    events: list[Envelope],
    *,
    run_id: str,
    config: GpufragSettings | None = None,
) -> str:
    """The events through the embedded runner into a new chDB store; its DSN. ``config``: the
    pipeline's settings (default: the defaults, actions planned as a dry run)."""
    dsn = dsn_for(tmp_path / "store")
    asyncio.run(_run_into(StoreSettings(dsn=dsn), events, run_id, config or GpufragSettings()))
    return dsn
