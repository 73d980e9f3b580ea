"""A full disk under the store: told apart from an outage, and said in one line with where.

An outage ends by itself (a server restarts, a table is attached again), so the sink waits it
out. A full disk does not: retrying only holds the rows in memory until the process is killed,
which is how a replay once stored 12,032 of its 25,219 events and then sat silent until SIGTERM.
So a full disk stops the sink (``StoreFullError``) and the command that runs it says where the
disk is, what was kept, and that a re-run after freeing space adds no duplicate (every table
is a ReplacingMergeTree keyed on the rows).

ClickHouse says it two ways: it refuses to reserve room for a part (code 243,
``NOT_ENOUGH_SPACE``, also what ``min_free_disk_bytes_to_perform_insert`` raises), or a write
that had its reservation fails with the operating system's ENOSPC (errno 28, "No space left on
device"), which a spool write raises as OSError too.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from connectors.clickhouse.dsn import StoreError, StoreLocation
from connectors.clickhouse.store import Store

__all__ = [
    "StoreFullError",
    "check_room",
    "disk_full_error",
    "hold_merges",
    "is_disk_full",
    "spool_floor",
]

_MARKERS = (
    "(NOT_ENOUGH_SPACE)",
    "Code: 243.",
    "No space left on device",
    "errno: 28,",
    "[Errno 28]",
)


class StoreFullError(StoreError):
    """The disk holding the store is full: the sink stops instead of retrying for ever."""

    def add(self, text: str) -> None:
        """Append what became of the rows (known only once the sink has spooled them) to this
        very error, so whichever command it propagates through prints it in its one line."""
        self.args = (f"{self.message}; {text}",)


def is_disk_full(message: str) -> bool:
    """True for ClickHouse's and the operating system's ways of saying the disk is full."""
    return any(marker in message for marker in _MARKERS)


def disk_full_error(location: StoreLocation, reason: str, *, keep_free_mib: int) -> StoreFullError:
    """The one line: which disk (the chDB directory, or the server's), how much it has left,
    and why ClickHouse refused, in a few words (its own sentence runs to 400 characters)."""
    if "min_free_disk_bytes_to_perform_insert" in reason:
        why = f"under the {keep_free_mib} MiB GPUFRAG_STORE__KEEP_FREE_MIB keeps free"
    else:
        why = _engine_words(reason)
    if location.kind != "chdb" or location.path is None:
        return StoreFullError(
            f"the disk of the ClickHouse server at {location.describe()} is full: {why}"
        )
    try:
        usage = shutil.disk_usage(location.path)
    except OSError:
        left = ""
    else:
        left = f", {_mib(usage.free)} free of {_mib(usage.total)}"
    return StoreFullError(f"the disk holding the store {location.path} is full ({why}{left})")


def check_room(store: Store, *, keep_free_mib: int) -> None:
    """Refuse to start writing a store whose disk is full already: a run would fail at its
    first insert, and its first statements (a re-run deletes the run's old rows, a mutation)
    wait for ever for room that never comes. Needed: what the sink keeps free, and at least
    the 1 MiB any ClickHouse insert reserves."""
    rows = store.query("SELECT free_space FROM system.disks WHERE name = 'default'").rows
    if not rows:
        return
    free, need = int(rows[0][0]), max(keep_free_mib, 1) * 2**20
    if free < need:
        full = disk_full_error(
            store.location, f"{_mib(free)} free, {_mib(need)} needed", keep_free_mib=keep_free_mib
        )
        full.add("free space there and run again")
        raise full


def hold_merges(store: Store, *, wait_s: float = 30.0) -> None:
    """Stop a chDB store's background merges and wait (at most ``wait_s``) for the running
    ones to end, so the room the sink kept free is still there for the run's end row.

    A merge writes its new part before it drops the parts it replaces, so one that runs after
    the sink stopped can take the last MiB kept free: a re-run of a full-disk replay once
    could not mark itself failed that way (a CI run; the parts of a 6 MiB store are about
    1 MiB). A merge that fails for lack of room removes what it wrote, so once none runs the
    room is back. Only a chDB engine, which lives in this process and ends with it, is
    stopped; a server's merges belong to every client of that server."""
    if store.location.kind != "chdb":
        return
    store.command("SYSTEM STOP MERGES")
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if not store.query("SELECT 1 FROM system.merges LIMIT 1").rows:
            return
        time.sleep(0.05)


def spool_floor(directory: Path, location: StoreLocation, *, keep_free_mib: int) -> int:
    """Bytes a spool in ``directory`` must leave free: what the store keeps free when the spool
    is on a chDB store's own disk (filled to the last byte, a chDB store was found unable to
    open, its part files cut short); nothing on another disk."""
    if location.kind != "chdb" or location.path is None:
        return 0
    probe = directory if directory.exists() else directory.parent
    try:
        shared = probe.stat().st_dev == location.path.stat().st_dev
    except OSError:
        return 0
    return keep_free_mib * 2**20 if shared else 0


def _mib(size: int) -> str:
    return f"{size / 2**20:.1f} MiB"


def _engine_words(reason: str) -> str:
    """ClickHouse's first sentence without the ``cannot insert into t: Code: 243.
    DB::Exception:`` before it, which says nothing a user needs."""
    text = reason.split("DB::Exception: ", 1)[-1].strip()
    first = text.split(". ", 1)[0].rstrip(".")
    return first[:160]
