"""`sink`: rows a second into chDB through the history sink (rows built from events, buffered,
inserted in batches), against one bulk insert of the same rows through clickhouse-connect."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Sequence
from datetime import UTC, datetime

import orjson

from connectors.clickhouse.migrate import apply_migrations, default_sql_dir
from connectors.clickhouse.rows import event_row
from connectors.clickhouse.sink import ClickHouseSink
from connectors.clickhouse.store import open_store
from models import Envelope, StoreSettings, from_json
from streams.app.bench import synthetic
from streams.app.bench.figures import Figure, Goal
from streams.app.bench.runner import Context, measure
from streams.app.lifecycle.settings_load import load_settings

TABLE = "events"


def sink(ctx: Context) -> list[Figure]:
    s = ctx.scale
    c = synthetic.cluster(seed=ctx.seed, nodes=max(s.sink_rows // 100, 10), running=0, pending=10)
    events = [
        from_json(Envelope, orjson.dumps(e))
        for e in synthetic.live_events(c, seed=ctx.seed, count=s.sink_rows, first_seq=0)
    ]
    settings = load_settings().store.model_copy(
        update={"dsn": f"chdb://{ctx.workdir / 'sink-store'}"}
    )
    store = open_store(settings)
    try:
        apply_migrations(store, default_sql_dir())
        runs = itertools.count()
        at = datetime.now(UTC)

        def through_sink() -> float:
            # each run its own run_id, so no run's rows replace another's
            run_id = f"bench-sink-{next(runs)}"
            start = time.perf_counter()
            asyncio.run(_write(settings, [event_row(run_id, e, ingested_at=at) for e in events]))
            return len(events) / (time.perf_counter() - start)

        def bulk() -> float:
            rows = [event_row(f"bench-bulk-{next(runs)}", e, ingested_at=at) for e in events]
            start = time.perf_counter()
            store.insert(TABLE, rows)
            return len(rows) / (time.perf_counter() - start)

        written = measure(ctx, "sink: through the store writer", through_sink)
        inserted = measure(ctx, "sink: one bulk insert", bulk)
    finally:
        store.close()
    return [
        Figure(
            case="sink",
            name="rows_per_s",
            unit="rows/s",
            samples=written,
            baseline="one bulk insert (clickhouse-connect)",
            baseline_samples=inserted,
            targets=(Goal(0.8, at_most=False, of="ratio"),),
            params={"table": TABLE, "rows": len(events)},
        ),
    ]


async def _write(settings: StoreSettings, rows: Sequence[dict[str, object]]) -> None:
    """The sink as a run uses it: it opens the store (chDB shares the open one within a
    process) and closes it at its stop."""
    writer = ClickHouseSink(lambda: open_store(settings), settings)
    await writer.start()
    await writer.write(TABLE, rows)
    await writer.stop()
