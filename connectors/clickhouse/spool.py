"""Rows a stopping sink could not write, kept on disk until a later sink writes them.

One JSON-lines file per stop, written to a temporary name, synced and renamed, so a file that
exists is complete. Each line is ``{"table": ..., "row": {...}, "types": {...}}``: JSON has no
datetime, so ``types`` marks the columns whose values must be turned back into Python values
(datetimes, non-finite floats, bytes) for the insert to mean the same thing it would have.
"""

from __future__ import annotations

import base64
import contextlib
import errno
import logging
import math
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from connectors.clickhouse.dsn import StoreError

__all__ = [
    "SpoolFile",
    "read_spool",
    "reload_spool",
    "spool_rows",
    "spool_what_fits",
    "write_spool",
]

log = logging.getLogger(__name__)

_PATTERN = "spool-*.jsonl"


@dataclass(frozen=True, slots=True)
class SpoolFile:
    path: Path
    rows: list[tuple[str, dict[str, object]]]
    """(table, row) in the order they were buffered."""


def write_spool(directory: Path, rows: Iterable[tuple[str, dict[str, object]]]) -> Path:
    """Write ``rows`` to a new spool file in ``directory`` and return its path."""
    directory.mkdir(parents=True, exist_ok=True)
    # Nanosecond time first, so sorting file names replays stops in the order they happened.
    name = f"spool-{time.time_ns():020d}-{os.getpid()}-{os.urandom(3).hex()}"
    final = directory / f"{name}.jsonl"
    tmp = directory / f".{name}.jsonl.tmp"
    with tmp.open("wb") as handle:
        for table, row in rows:
            handle.write(_encode_line(table, row))
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, final)
    _fsync_dir(directory)
    return final


def spool_what_fits(
    directory: Path, rows: list[tuple[str, dict[str, object]]], *, floor_bytes: int = 0
) -> tuple[Path | None, int]:
    """Like ``write_spool``, but a full disk (ENOSPC) keeps the rows written until then, whole
    lines in their order, instead of none: the spool usually sits beside the store, so when the
    store's disk is full so is the spool's, and every row kept is one the next start writes.
    No row is written that would leave less than ``floor_bytes`` free (the room the store on
    the same disk keeps for itself). Returns the file (None when not even one row fit) and how
    many rows it holds; other OSErrors are raised as in ``write_spool``."""
    directory.mkdir(parents=True, exist_ok=True)
    room = None
    if floor_bytes:
        disk = os.statvfs(directory)
        room = disk.f_bavail * disk.f_frsize - floor_bytes
    name = f"spool-{time.time_ns():020d}-{os.getpid()}-{os.urandom(3).hex()}"
    final = directory / f"{name}.jsonl"
    tmp = directory / f".{name}.jsonl.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        kept = _write_lines(fd, rows, room)
        if kept:
            os.fsync(fd)
    except OSError as exc:
        os.close(fd)
        fd = -1
        tmp.unlink(missing_ok=True)  # a hidden half-file would take room and never be read
        if exc.errno != errno.ENOSPC:
            raise
        # the disk filled at fsync (delayed allocation): what was written is not on disk
        return None, 0
    finally:
        if fd >= 0:
            os.close(fd)
    if not kept:
        tmp.unlink(missing_ok=True)
        return None, 0
    os.replace(tmp, final)
    _fsync_dir(directory)
    return final, kept


def spool_rows(
    directory: Path, rows: list[tuple[str, dict[str, object]]], *, floor_bytes: int = 0
) -> tuple[Path | None, int, str]:
    """``spool_what_fits``, and a line saying what it kept, so that rows not kept are never a
    surprise; any other failure to spool is a StoreError."""
    try:
        path, kept = spool_what_fits(directory, rows, floor_bytes=floor_bytes)
    except OSError as exc:
        raise StoreError(
            f"{len(rows)} rows could not be written to the store nor spooled to {directory}: {exc}"
        ) from exc
    total = len(rows)
    if kept == total:
        return path, kept, f"{kept} unwritten rows spooled to {path}"
    where = f"the spool at {directory} is " + (
        "on the store's full disk" if floor_bytes else "full too"
    )
    if not kept:
        return path, kept, f"{where}: none of {total} unwritten rows kept"
    name = path.name if path else ""
    said = f"{where}: {kept} of {total} unwritten rows kept in {name}, {total - kept} not kept"
    return path, kept, said


def _write_lines(fd: int, rows: list[tuple[str, dict[str, object]]], room: int | None) -> int:
    """Write one line per row while ``room`` (bytes; None: the whole disk) lasts; on ENOSPC cut
    the file back to its last whole line. Returns how many rows it holds. A line at a time, so
    what a full disk took is known exactly."""
    offset = 0
    for index, (table, row) in enumerate(rows):
        line = memoryview(_encode_line(table, row))
        if room is not None and offset + len(line) > room:
            return index
        try:
            while line:
                written = os.write(fd, line)
                line = line[written:]
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise
            os.ftruncate(fd, offset)
            return index
        offset = os.lseek(fd, 0, os.SEEK_CUR)
    return len(rows)


def reload_spool(directory: Path) -> list[SpoolFile]:
    """The spool files a starting sink re-sends: unreadable ones are renamed aside (neither lost
    nor retried for ever) and empty ones removed."""
    files, bad = read_spool(directory)
    for path, why in bad:
        aside = path.with_name(path.name + ".unreadable")
        path.rename(aside)
        log.error("spool file %s cannot be read (%s); kept as %s", path, why, aside)
    for spool in files:
        if not spool.rows:
            spool.path.unlink(missing_ok=True)
    return [spool for spool in files if spool.rows]


def read_spool(directory: Path) -> tuple[list[SpoolFile], list[tuple[Path, str]]]:
    """Spool files of ``directory``, oldest first, and the files that could not be read with
    why (a caller renames those aside so they are neither lost nor retried forever)."""
    if not directory.is_dir():
        return [], []
    good: list[SpoolFile] = []
    bad: list[tuple[Path, str]] = []
    for path in sorted(directory.glob(_PATTERN)):
        try:
            rows = [_decode_line(line) for line in path.read_bytes().splitlines() if line.strip()]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            bad.append((path, f"{type(exc).__name__}: {exc}"))
            continue
        good.append(SpoolFile(path=path, rows=rows))
    return good, bad


def _encode_line(table: str, row: dict[str, object]) -> bytes:
    values: dict[str, object] = {}
    types: dict[str, str] = {}
    for column, value in row.items():
        values[column], kind = _encode_value(value)
        if kind:
            types[column] = kind
    line = {"table": table, "row": values, "types": types}
    return orjson.dumps(line, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS) + b"\n"


def _encode_value(value: object) -> tuple[object, str | None]:
    if isinstance(value, datetime):
        return value.isoformat(), "datetime"
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value), "float"
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(bytes(value)).decode(), "bytes"
    if isinstance(value, tuple):
        return list(value), None
    if value is None or isinstance(value, str | int | float | bool | dict | list):
        return value, None
    # Unknown types are kept as text rather than dropped; if the column refuses the text, the
    # row is dead-lettered with the reason when it is re-sent.
    return repr(value), None


def _decode_line(line: bytes) -> tuple[str, dict[str, object]]:
    data: Any = orjson.loads(line)
    table = data["table"]
    row: dict[str, object] = dict(data["row"])
    types: dict[str, str] = data.get("types", {})
    for column, kind in types.items():
        row[column] = _decode_value(row[column], kind)
    if not isinstance(table, str):
        raise TypeError(f"table must be a string, got {table!r}")
    return table, row


def _decode_value(value: object, kind: str) -> object:
    if not isinstance(value, str):
        raise TypeError(f"a {kind} value must be spooled as text, got {value!r}")
    if kind == "datetime":
        return datetime.fromisoformat(value)
    if kind == "float":
        return float(value)
    if kind == "bytes":
        return base64.b64decode(value)
    raise ValueError(f"unknown spooled value type {kind!r}")


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):  # some filesystems cannot sync a directory
            os.fsync(fd)
    finally:
        os.close(fd)
