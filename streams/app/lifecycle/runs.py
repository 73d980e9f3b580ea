"""A pipeline run that writes the history store: its row in ``runs``, how it stops, what
becomes of it when its process dies, and which run a read command reads by default.

Shared by `gpufrag replay` and `gpufrag watch --bus embedded`, so a replay and a live session
are recorded alike and a Ctrl-C means the same in both.

A run's status is ``running`` from its first row until its last: ``finished`` (it ended by
itself, or a live session was stopped as it is meant to be), ``interrupted`` (a replay stopped
early by Ctrl-C, with what was done until then stored), ``failed`` (an error stopped it), or
``abandoned`` (its process died without writing an end, found when the store is next opened).
Only a ``finished`` run is complete, so only one is read by default.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import orjson
from rich.console import Console

from connectors.clickhouse.sink import ClickHouseSink
from connectors.clickhouse.store import Store
from streams.app.queries.named_queries import QueryError

__all__ = [
    "ABANDONED",
    "FINISHED",
    "RUNNING",
    "RunChoice",
    "StoreInterrupts",
    "StoredRun",
    "abandon_orphaned_runs",
    "choose_run",
    "run_row",
]

RUNNING = "running"
FINISHED = "finished"
ABANDONED = "abandoned"

# What a run that did not finish holds, for the line a read command prints about it.
_UNFINISHED = {
    RUNNING: "it has not ended, so its rows are still being written (or, on a server store, "
    "its process died and nothing can tell)",
    "interrupted": "stopped early by Ctrl-C; it holds what was done until then",
    "failed": "stopped by an error; it holds what was done until then",
    ABANDONED: "its process died before ending it; it holds what was stored until then",
}


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
    ends and what was taken is still stored, unless the store is not taking rows (an outage
    now or while stopping): then nobody waits for it, and the sink spools its unwritten rows
    for the next start, as it does at once on a second signal. The handlers stay installed
    until the sink has stopped, so a signal is never the default, instant death that would
    leave no summary and no spool."""

    def __init__(self, *, stop: Callable[[], None], sink: ClickHouseSink, console: Console) -> None:
        self.stop = stop
        self.sink = sink
        self.console = console
        self.count = 0
        self._forced: list[asyncio.Task[None]] = []
        self._watch: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def forced(self) -> bool:
        return bool(self._forced)

    def _on_signal(self) -> None:
        self.count += 1
        self.stop()
        if self.count == 1:
            self._watch = asyncio.ensure_future(self._force_in_outage())
        elif self.count == 2:
            self._force("second interrupt: spooling unwritten rows and stopping")

    async def _force_in_outage(self) -> None:
        await self.sink.wait_for_outage()
        self._force("the store is not taking rows: spooling unwritten rows and stopping")

    def _force(self, said: str) -> None:
        if self._forced:
            return
        self.console.print(said, highlight=False)
        self.sink.hurry()
        self._forced.append(asyncio.ensure_future(self.sink.stop(timeout_s=0)))

    def install(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._loop.add_signal_handler(signal.SIGINT, self._on_signal)
        self._loop.add_signal_handler(signal.SIGTERM, self._on_signal)

    async def finish(self) -> None:
        """Flush and stop the sink (or let a forced stop finish), then stop listening."""
        try:
            if self._forced:
                await asyncio.gather(*self._forced, return_exceptions=True)
            await self.sink.stop()
        finally:
            if self._watch is not None:
                self._watch.cancel()
            if self._loop is not None:
                self._loop.remove_signal_handler(signal.SIGINT)
                self._loop.remove_signal_handler(signal.SIGTERM)
                self._loop = None

    def report_forced(self) -> None:
        if self.sink.spooled_file is None:
            return  # nothing was left unwritten
        self.console.print(
            f"stopped with the store not taking rows: the {self.sink.spooled_rows} unwritten "
            f"rows in {self.sink.spooled_file} are written by the next replay or sink start",
            highlight=False,
            soft_wrap=True,
        )


def abandon_orphaned_runs(store: Store) -> list[str]:
    """Mark ``abandoned`` every ``running`` run of a store that nothing else can be writing;
    returns their ids.

    A killed process never writes its run's last row, so without this its run would stay
    ``running`` for ever and look like the newest, live one. The store's lock tells: see
    :meth:`Store.exclusive`. A server store is left alone, since a run there may be live in
    another process."""
    if not store.exclusive():
        return []
    found = store.query(
        "SELECT * FROM runs FINAL WHERE status = {status:String}", {"status": RUNNING}
    ).dicts()
    if not found:
        return []
    now = datetime.now(UTC)
    for row in found:
        # a new version of the row: ReplacingMergeTree keeps the latest updated_at, so it must
        # be later than the running row's even when the clock stepped back since
        row["updated_at"] = max(now, row["updated_at"] + timedelta(milliseconds=1))
        row["status"] = ABANDONED
    store.insert("runs", found)
    return [str(row["run_id"]) for row in found]


@dataclass(frozen=True, slots=True)
class StoredRun:
    """A run's latest row, as much as choosing and naming it needs."""

    run_id: str
    status: str
    started_at: datetime
    updated_at: datetime

    def describe(self) -> str:
        """When a run ended is what tells two runs apart; one that never ended (or whose end
        was only noticed later, when abandoned) is told by when it started."""
        if self.status in (RUNNING, ABANDONED):
            return f"{self.status}, started {_minute(self.started_at)}"
        return f"{self.status} {_minute(self.updated_at)}"


@dataclass(frozen=True, slots=True, kw_only=True)
class RunChoice:
    """The run a read command reads, and the newer unfinished runs the default passed over."""

    run: StoredRun
    explicit: bool
    newer: tuple[StoredRun, ...] = ()

    def note(self) -> str | None:
        """The stderr line that keeps a partial or passed-over run from going unnoticed; none
        for a finished run the user named."""
        run = self.run
        if self.explicit:
            if run.status == FINISHED:
                return None
            meaning = _UNFINISHED.get(run.status, "not complete")
            return f"reading run {run.run_id} ({run.describe()}): {meaning}"
        text = f"reading run {run.run_id} ({run.describe()})"
        if len(self.newer) == 1:
            text += f"; newer run {self.newer[0].run_id} is {self.newer[0].status}"
        elif self.newer:
            shown = ", ".join(f"{r.run_id} ({r.status})" for r in self.newer[:3])
            more = f" and {len(self.newer) - 3} more" if len(self.newer) > 3 else ""
            text += f"; newer runs {shown}{more} did not finish"
        return text


def choose_run(store: Store, run_id: str | None, *, option: str) -> RunChoice:
    """The run named, or else the latest finished one: a run that did not finish covers only
    part of its input, and read as "the latest" it would pass for a complete one.

    ``option`` is how the command names a run (``--run ``), for the hint when no run finished.
    Raises QueryError when there is nothing to read."""
    runs = [
        StoredRun(str(i), str(s), started, updated)
        for i, s, started, updated in store.query(
            "SELECT run_id, status, started_at, updated_at FROM runs FINAL "
            "ORDER BY started_at DESC, run_id"
        ).rows
    ]
    if run_id is not None:
        named = next((r for r in runs if r.run_id == run_id), None)
        if named is None:
            raise QueryError(f"no run {run_id!r} in the store")
        return RunChoice(run=named, explicit=True)
    if not runs:
        raise QueryError("the store has no runs yet; run `gpufrag replay` first")
    for index, run in enumerate(runs):
        if run.status == FINISHED:
            return RunChoice(run=run, explicit=False, newer=tuple(runs[:index]))
    newest = runs[0]
    raise QueryError(
        f"the store has no finished run; the newest, {newest.run_id}, is {newest.status} "
        f"({_UNFINISHED.get(newest.status, 'not complete')}): pass {option}{newest.run_id} to "
        "read it anyway"
    )


def _minute(at: datetime) -> str:
    aware = at if at.tzinfo else at.replace(tzinfo=UTC)
    return f"{aware.astimezone(UTC):%Y-%m-%d %H:%M} UTC"
