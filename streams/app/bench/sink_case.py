"""`sink`: rows a second into chDB through the history sink (buffered, inserted in batches of
``batch_rows`` from a background writer), against one bulk insert of the same rows through
clickhouse-connect.

The rows are the ``events`` rows of generated live events, as value tuples in column order:
what the embedded runner hands the sink. ``rows_per_s`` times the sink alone on rows built
beforehand, as the bulk insert is timed on rows built beforehand: the same work on both sides
of the ratio. ``built_rows_per_s`` also times building the rows from the events (each
payload's canonical JSON text is most of it), the cost a replay pays per event; it has no
target, it shows what the store costs a run beyond the insert. The three are measured in turn
in each run, so a change of load on the machine falls on all of them alike.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Sequence
from datetime import UTC, datetime

import orjson

from connectors.clickhouse.migrate import apply_migrations, default_sql_dir
from connectors.clickhouse.row_values import EVENT_COLUMNS, Values, event_values
from connectors.clickhouse.sink import ClickHouseSink
from connectors.clickhouse.store import open_store
from models import Envelope, StoreSettings, from_json
from streams.app.bench import synthetic
from streams.app.bench.figures import Figure, Goal
from streams.app.bench.runner import Context, measure_each
from streams.app.lifecycle.settings_load import load_settings

TABLE = "events"
BASELINE = "one bulk insert (clickhouse-connect, column-oriented)"


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

        def rows(kind: str) -> list[Values]:
            # each run its own run_id, so no run's rows replace another's
            run_id = f"bench-{kind}-{next(runs)}"
            return [event_values(run_id, e, ingested_at=at) for e in events]

        def sample() -> tuple[float, float, float]:
            built = rows("sink")
            start = time.perf_counter()
            asyncio.run(_write(settings, built))
            through_sink = len(built) / (time.perf_counter() - start)

            start = time.perf_counter()
            asyncio.run(_write(settings, rows("built")))
            with_building = len(events) / (time.perf_counter() - start)

            built = rows("bulk")
            start = time.perf_counter()
            store.insert_rows(TABLE, EVENT_COLUMNS, built)
            bulk = len(built) / (time.perf_counter() - start)
            return through_sink, with_building, bulk

        written, built_written, inserted = measure_each(ctx, "sink", sample)
    finally:
        store.close()
    params = {"table": TABLE, "rows": len(events), "batch_rows": settings.batch_rows}
    return [
        Figure(
            case="sink",
            name="rows_per_s",
            unit="rows/s",
            samples=written,
            baseline=BASELINE,
            baseline_samples=inserted,
            targets=(Goal(0.8, at_most=False, of="ratio"),),
            params=params,
        ),
        Figure(
            case="sink",
            name="built_rows_per_s",
            unit="rows/s",
            samples=built_written,
            baseline=BASELINE,
            baseline_samples=inserted,
            note="rows built from the events in the timed part (payload JSON text included)",
            params=params,
        ),
    ]


async def _write(settings: StoreSettings, rows: Sequence[Values]) -> None:
    """The sink as a run uses it: it opens the store (chDB shares the open one within a
    process) and closes it at its stop."""
    writer = ClickHouseSink(lambda: open_store(settings), settings)
    await writer.start()
    await writer.write_rows(TABLE, EVENT_COLUMNS, rows)
    await writer.stop()
