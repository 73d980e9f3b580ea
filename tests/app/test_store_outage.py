"""A store outage in the middle of a replay: rows wait, retries go on, nothing is lost."""

from __future__ import annotations

import asyncio
from pathlib import Path

from connectors.clickhouse.sink import ClickHouseSink
from connectors.clickhouse.store import open_store
from connectors.trace.alibaba_csv import read_nodes, read_pods
from connectors.trace.bundled import bundled_nodes_path, bundled_pods_path
from models import GpufragSettings, StoreSettings
from streams.app.lifecycle.history import open_history
from streams.app.replaying.workload import pod_shape
from streams.app.sinks.store_output import StoreOutput
from streams.fragmentation.shapes import TypicalPods
from streams.pipeline import define_pipeline
from streams.runner.embedded import EmbeddedRunner
from streams.runner.fanout import Fanout
from streams.simulation.cluster import ReplayOptions, SimulatedCluster, TraceMode
from tests.app.pipeline_helpers import as_keys, stored_keys
from tests.app.reference_replay import operator_signals

NODE_LIMIT = 40


async def test_outage_mid_replay_buffers_retries_and_loses_nothing(tmp_path: Path) -> None:
    # 100-row batches, below the settings' floor on purpose (model_copy does not validate),
    # so a 40-node replay spans many inserts and the outage falls between them.
    settings = StoreSettings(dsn=f"chdb://{tmp_path}/st").model_copy(
        update={
            "batch_rows": 100,
            "flush_interval_s": 0.05,
            "retry_initial_s": 0.05,
            "retry_max_s": 0.2,
        }
    )
    store = await asyncio.to_thread(open_history, settings)
    sink = ClickHouseSink(lambda: open_store(settings), settings)
    await sink.start()
    pods = read_pods(bundled_pods_path())
    sim = SimulatedCluster(
        read_nodes(bundled_nodes_path()),
        pods,
        options=ReplayOptions(
            mode=TraceMode.FGD, node_limit=NODE_LIMIT, source="trace:openb_pod_list_default"
        ),
    )
    detached = asyncio.Event()

    def on_progress(n: int, _at: object) -> None:
        if n == 60:
            for table in ("signals", "events"):
                store.command(f"DETACH TABLE {table}")
            detached.set()

    runner = EmbeddedRunner(
        source=sim.events(),
        output=Fanout([StoreOutput(sink, run_id="outage")]),
        pipeline=define_pipeline(
            GpufragSettings(), typical=TypicalPods.from_shapes(map(pod_shape, pods))
        ).build(),
        on_progress=on_progress,
    )
    run = asyncio.create_task(runner.run())
    await asyncio.wait_for(detached.wait(), 60)
    # the outage is seen: inserts fail and rows stay buffered instead of being dropped
    async with asyncio.timeout(30):
        while not (sink.insert_errors.get("events") and sink.buffered_for("events")):
            await asyncio.sleep(0.02)
    assert sink.dead_lettered_rows == {}
    await asyncio.sleep(0.5)  # several retries while the tables are gone
    for table in ("signals", "events"):
        await asyncio.to_thread(store.command, f"ATTACH TABLE {table}")
    await asyncio.wait_for(run, 120)
    await sink.stop()
    assert sink.retries > 0
    reg = runner.registry
    assert reg.get_sample_value("gpufrag_stage_events_in_total", {"stage": "analysis"}) == (
        runner.processed
    )
    assert reg.get_sample_value("gpufrag_stage_errors_total", {"stage": "join"}) in (None, 0.0)
    queued = reg.get_sample_value("gpufrag_stage_queue_items", {"queue": "join->analysis"})
    assert queued is not None
    assert reg.get_sample_value("gpufrag_stage_lag_seconds", {"stage": "analysis"}) == 0.0
    assert sink.dead_lettered_rows == {}
    events = int(str(store.query("SELECT count() FROM events FINAL").rows[0][0]))
    assert events == runner.processed
    store.close()
    rows = _signals(settings)
    assert stored_keys(rows) == as_keys(operator_signals())


def _signals(settings: StoreSettings) -> list[dict[str, object]]:
    st = open_store(settings)
    try:
        res = st.query(
            "SELECT fingerprint, kind, scope_id, state, opened_at, resolved_at, evidence "
            "FROM signals FINAL"
        )
        return [dict(zip(res.columns, r, strict=True)) for r in res.rows]
    finally:
        st.close()
