"""The writers of one run, so that several sinks end it once: each beats while it stores, and
the one that stops last (no other beat fresh) marks the run finished. A run with one writer
ends as before."""

from __future__ import annotations

import asyncio
import os
import socket
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import orjson

from connectors.clickhouse.store import Store

BEAT_S = 30.0
"""How often a writer says it still stores. Three missed beats (90 s) and it counts as gone:
a sink stopping waits for no dead one, and one paused that long by a busy host is rare."""
GONE_AFTER_BEATS = 3


def writer_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


@dataclass(slots=True)
class RunWriters:
    store: Store
    run_id: str
    writer: str = field(default_factory=writer_id)
    beat_s: float = BEAT_S

    async def join(self) -> None:
        await self._put("storing", {})

    async def beat(self) -> None:
        """Runs until cancelled."""
        while True:
            await asyncio.sleep(self.beat_s)
            await self._put("storing", {})

    async def leave(self, stored: dict[str, int]) -> list[str]:
        """Say this writer stopped; the others still storing (their beats fresh), sorted."""
        now = datetime.now(UTC)
        await self._put("stopped", stored, at=now)
        rows = await asyncio.to_thread(
            self.store.query,
            "SELECT writer, state, beat_at FROM run_writers FINAL WHERE run_id = {run:String}",
            {"run": self.run_id},
        )
        fresh = now - timedelta(seconds=GONE_AFTER_BEATS * self.beat_s)
        return sorted(
            str(w)
            for w, state, beat_at in rows.rows
            if w != self.writer and state == "storing" and _utc(beat_at) >= fresh
        )

    async def _put(self, state: str, stored: dict[str, int], *, at: datetime | None = None) -> None:
        row = {
            "run_id": self.run_id,
            "writer": self.writer,
            "state": state,
            "beat_at": at or datetime.now(UTC),
            "stored": orjson.dumps(stored).decode(),
        }
        await asyncio.to_thread(self.store.insert, "run_writers", [row])


def _utc(value: object) -> datetime:
    assert isinstance(value, datetime)
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
