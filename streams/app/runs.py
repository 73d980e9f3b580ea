"""A pipeline run that writes the history store: its row in ``runs``, and how it stops.

Shared by `gpufrag replay` and `gpufrag watch --bus embedded`, so a replay and a live session
are recorded alike and a Ctrl-C means the same in both.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from datetime import UTC, datetime

import orjson
from rich.console import Console

from connectors.clickhouse.sink import ClickHouseSink

__all__ = ["StoreInterrupts", "run_row"]


def run_row(
    run_id: str,
    *,
    status: str,
    started: datetime,
    source: str,
    mode: str,
    policy: str,
    seed: int,
    params: dict[str, object],
    summary: dict[str, object],
) -> dict[str, object]:
    """A row of ``runs``; a later row for the same run replaces it (ReplacingMergeTree on
    ``updated_at``), so a run is written when it starts and again when it ends."""
    return {
        "run_id": run_id,
        "started_at": started,
        "updated_at": datetime.now(UTC),
        "status": status,
        "source": source,
        "mode": mode,
        "policy": policy,
        "seed": seed,
        "params": orjson.dumps(params, option=orjson.OPT_SORT_KEYS).decode(),
        "summary": orjson.dumps(summary, option=orjson.OPT_SORT_KEYS).decode(),
    }


class StoreInterrupts:
    """SIGINT/SIGTERM while a pipeline writes the store. The first calls ``stop``: the input
    ends and what was taken is still stored. The second means the store may be down and the
    user will not wait for it: the sink stops at once and spools its unwritten rows for the
    next start."""

    def __init__(self, *, stop: Callable[[], None], sink: ClickHouseSink, console: Console) -> None:
        self.stop = stop
        self.sink = sink
        self.console = console
        self.count = 0
        self._forced: list[asyncio.Task[None]] = []
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def forced(self) -> bool:
        return bool(self._forced)

    def _on_signal(self) -> None:
        self.count += 1
        self.stop()
        if self.count == 2:
            self.console.print(
                "second interrupt: spooling unwritten rows and stopping", highlight=False
            )
            self._forced.append(asyncio.ensure_future(self.sink.stop(timeout_s=0)))

    def install(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._loop.add_signal_handler(signal.SIGINT, self._on_signal)
        self._loop.add_signal_handler(signal.SIGTERM, self._on_signal)

    async def finish(self) -> None:
        """Stop listening, then flush and stop the sink (or let the forced stop a second
        interrupt began finish)."""
        if self._loop is not None:
            self._loop.remove_signal_handler(signal.SIGINT)
            self._loop.remove_signal_handler(signal.SIGTERM)
            self._loop = None
        if self._forced:
            await asyncio.gather(*self._forced, return_exceptions=True)
        await self.sink.stop()

    def report_forced(self) -> None:
        self.console.print(
            f"stopped with the store unreachable: unwritten rows are in {self.sink.spool_dir} "
            "and are written by the next replay or sink start",
            highlight=False,
        )
