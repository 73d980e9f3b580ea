"""A scripted cluster through the embedded runner into a new chDB store, as `gpufrag replay`
stores a run: steps of watch events one minute apart, then the run marked finished so the
commands that read the latest finished run (`explain`, `actions`) find it."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

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
from tests.streams.quota_scenarios import Step

__all__ = ["events", "finished_run", "stored_run"]


def events(steps: list[Step]) -> list[Envelope]:
    """The steps one minute apart (longer than the pending queue's evaluation interval), in
    source order."""
    out: list[Envelope] = []
    for n, step in enumerate(steps):
        for env in step.events:
            at = T0 + timedelta(minutes=n)
            out.append(env.model_copy(update={"event_time": at, "seq": len(out)}))
    return out


async def _run_into(
    settings: StoreSettings, steps: list[Step], *, run_id: str, config: GpufragSettings
) -> None:
    await asyncio.to_thread(lambda: open_history(settings).close())
    sink = ClickHouseSink(lambda: open_store(settings), settings)
    await sink.start()
    runner = EmbeddedRunner(
        source=iter(events(steps)),
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


def finished_run(run_id: str) -> dict[str, object]:
    """A `runs` row of a finished live run, so the commands that read the latest finished run
    find ``run_id``."""
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
    steps: list[Step],
    *,
    run_id: str = "run-scripted",
    config: GpufragSettings | None = None,
) -> str:
    """The steps through the embedded runner into a new chDB store; its DSN. ``config``: the
    pipeline's settings (default: the defaults, guardrails in dry-run)."""
    dsn = dsn_for(tmp_path / "store")
    config = config or GpufragSettings()
    asyncio.run(_run_into(StoreSettings(dsn=dsn), steps, run_id=run_id, config=config))
    return dsn
