"""Several sinks store one run: the first to stop must not mark it finished while the others
still store, and a sink killed without stopping (its beats stale) must not keep the run open
for good. On ClickHouse's engine (chDB), with the writers as they record themselves."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from connectors.clickhouse.store import Store
from streams.app.lifecycle.run_writers import GONE_AFTER_BEATS, RunWriters


async def test_the_last_writer_to_stop_ends_the_run(store: Store) -> None:
    a, b, c = (RunWriters(store, "live", writer=w) for w in ("a", "b", "c"))
    for w in (a, b, c):
        await w.join()
    assert await a.leave({"events": 3}) == ["b", "c"]
    assert await b.leave({"events": 4}) == ["c"]
    assert await c.leave({"events": 5}) == []
    # another run's writers are not this run's
    other = RunWriters(store, "other", writer="x")
    await other.join()
    assert await RunWriters(store, "live", writer="d").leave({}) == []


async def test_a_writer_that_died_without_stopping_is_not_waited_for(store: Store) -> None:
    beat_s = 30.0
    alive = RunWriters(store, "live", writer="alive", beat_s=beat_s)
    dead = RunWriters(store, "live", writer="dead", beat_s=beat_s)
    await alive.join()
    # its last beat, older than the beats it may miss
    stale = datetime.now(UTC) - timedelta(seconds=GONE_AFTER_BEATS * beat_s + 5)
    await dead._put("storing", {}, at=stale)
    me = RunWriters(store, "live", writer="me", beat_s=beat_s)
    await me.join()
    assert await me.leave({}) == ["alive"]


async def test_beats_keep_a_writer_fresh(store: Store) -> None:
    slow = RunWriters(store, "live", writer="slow", beat_s=0.05)
    await slow.join()
    beating = asyncio.create_task(slow.beat())
    try:
        first = _beat_of(store, "slow")
        deadline = asyncio.get_running_loop().time() + 60
        while _beat_of(store, "slow") == first:
            assert asyncio.get_running_loop().time() < deadline, "no beat in 60 s"
            await asyncio.sleep(0.05)
    finally:
        beating.cancel()


def _beat_of(store: Store, writer: str) -> object:
    rows = store.query(
        "SELECT beat_at FROM run_writers FINAL WHERE writer = {w:String}", {"w": writer}
    ).rows
    return rows[0][0]
