"""Rows a stopping sink could not write, kept on disk until a later sink writes them.

One JSON-lines file per stop, written to a temporary name, synced and renamed, so a file that
exists is complete. Each line is ``{"table": ..., "row": {...}, "types": {...}}``: JSON has no
datetime, so ``types`` marks the columns whose values must be turned back into Python values
(datetimes, non-finite floats, bytes) for the insert to mean the same thing it would have.
"""

from __future__ import annotations

import base64
import contextlib
import math
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

__all__ = ["SpoolFile", "read_spool", "write_spool"]

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
