"""The pump between the sources' refusals (synchronous, mid-parse) and their dead-letter
destination (asynchronous): batches what gathered, writes what is left when the block ends
(a batch cut off mid-write included), and counts what it cannot hold."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from models.refusal import Refusal
from streams.app.live import refused
from streams.app.live.refused import RefusalPump


def refusal(n: int) -> Refusal:
    return Refusal(
        source="dcgm", reason="out_of_range", detail=f"line {n}", raw=f"l{n}", at=datetime.now(UTC)
    )


async def test_refusals_are_written_in_batches_and_the_rest_on_leaving() -> None:
    pump, batches = RefusalPump(), []
    gate = asyncio.Event()

    async def write(batch: list[Refusal]) -> None:
        await gate.wait()  # the store is slow: refusals gather meanwhile
        batches.append([r.detail for r in batch])

    async with pump.running(write):
        pump(refusal(1))
        await asyncio.sleep(0)  # the pump takes the first one and waits on the store
        for n in (2, 3, 4):
            pump(refusal(n))
        gate.set()
        async with asyncio.timeout(30):
            while len(batches) < 2:
                await asyncio.sleep(0.01)
        pump(refusal(5))
    assert batches[:2] == [["line 1"], ["line 2", "line 3", "line 4"]]
    assert [d for b in batches for d in b] == [f"line {n}" for n in range(1, 6)]
    assert pump.kept == 5 and pump.not_kept == 0


async def test_a_batch_cut_off_mid_write_is_written_again_when_leaving() -> None:
    pump, written, calls = RefusalPump(), [], 0
    started = asyncio.Event()

    async def write(batch: list[Refusal]) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            started.set()
            await asyncio.Event().wait()  # never finishes: cancelled at the block's end
        written.extend(r.detail for r in batch)

    async with pump.running(write):
        pump(refusal(1))
        async with asyncio.timeout(30):
            await started.wait()
    assert written == ["line 1"]  # the dead letter's id makes a double write one row


async def test_a_full_queue_counts_what_it_cannot_hold(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(refused, "HELD_MAX", 2)
    pump = RefusalPump()
    for n in range(5):
        pump(refusal(n))
    assert pump.not_kept == 3
