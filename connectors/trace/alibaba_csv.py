"""Strict reader for Alibaba ``cluster-trace-gpu-v2023`` node and pod lists.

Fragmentation results are only as good as the trace that feeds them, so every
value is checked and nothing is coerced: a bad cell stops the read with the
file, line and column to fix instead of silently shifting the numbers.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path
from typing import NoReturn

from models.gpu import check_gpu_model

__all__ = [
    "MAX_GPU_MILLI",
    "NODE_COLUMNS",
    "POD_COLUMNS_FULL",
    "POD_COLUMNS_SHORT",
    "TraceFormatError",
    "TraceNode",
    "TracePod",
    "read_nodes",
    "read_pods",
]

NODE_COLUMNS: tuple[str, ...] = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
POD_COLUMNS_SHORT: tuple[str, ...] = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
POD_COLUMNS_FULL: tuple[str, ...] = (
    *POD_COLUMNS_SHORT,
    "gpu_spec",
    "qos",
    "pod_phase",
    "creation_time",
    "deletion_time",
    "scheduled_time",
)
MAX_GPU_MILLI = 1000

StrPath = str | os.PathLike[str]


@dataclass(frozen=True, slots=True)
class TraceNode:
    """One node of the trace; ``gpu_model`` is None exactly when it has no GPU."""

    name: str
    cpu_milli: int
    memory_mib: int
    gpu_count: int
    gpu_model: str | None


@dataclass(frozen=True, slots=True)
class TracePod:
    """One pod of the trace; qos/phase/time fields are None when the file lacks or blanks them."""

    name: str
    cpu_milli: int
    memory_mib: int
    num_gpu: int
    gpu_milli: int
    gpu_spec: tuple[str, ...]
    qos: str | None
    phase: str | None
    creation_time: int | None
    deletion_time: int | None
    scheduled_time: int | None

    @property
    def shape(self) -> tuple[int, int, int, str]:
        """Hashable key for grouping pods by the demands fragmentation is measured on."""
        return (self.cpu_milli, self.gpu_milli, self.num_gpu, "|".join(self.gpu_spec))

    @property
    def total_gpu_milli(self) -> int:
        """GPU demand in milli-GPUs, comparable across shared and multi-GPU pods."""
        return self.num_gpu * self.gpu_milli


class TraceFormatError(ValueError):
    """Raised for any malformed trace input, so callers can point a user at the exact cell."""

    def __init__(self, file: str, line: int, column: str | None, reason: str) -> None:
        self.file = file
        self.line = line
        self.column = column
        self.reason = reason
        where = f"{file}:{line}:"
        super().__init__(
            f"{where} {reason}" if column is None else f"{where} column {column!r}: {reason}"
        )

    def __reduce__(self) -> tuple[type[TraceFormatError], tuple[str, int, str | None, str]]:
        # The default would call cls(message) and fail; keep the error picklable for workers.
        return (type(self), (self.file, self.line, self.column, self.reason))


# --------------------------------------------------------------------------- helpers


def _int_problem(text: str) -> str:
    if text == "":
        return "missing number"
    body = text[1:]
    if text[0] == "-" and body.isascii() and body.isdigit():
        return f"negative number {text}"
    return f"not a non-negative integer: {text!r}"


def _rows(path: StrPath) -> Iterator[tuple[int, list[str]]]:
    """Yield (first line, fields); decoding up front keeps error line numbers exact."""
    file = os.fspath(path)
    data = Path(path).read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise TraceFormatError(file, line, None, f"not valid UTF-8: {exc.reason}") from exc
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    # Report the line a record starts on: a quoted newline can stretch it over several.
    end = 0
    try:
        for row in reader:
            start, end = end + 1, reader.line_num
            yield start, row
    except csv.Error as exc:
        raise TraceFormatError(file, end + 1, None, f"malformed CSV: {exc}") from exc


class _Table:
    """Header-resolved view of one file, so per-row code can fail with full context."""

    def __init__(self, path: StrPath, allowed: Sequence[str], required: Sequence[str]) -> None:
        self.file = os.fspath(path)
        self.rows = _rows(path)
        first = next(self.rows, None)
        if first is None:
            self.fail(1, None, f"empty file; expected header {','.join(required)!r}")
        _, header = first
        self.header = header
        self.width = len(header)
        self.index: dict[str, int] = {}
        for i, column in enumerate(header):
            if column not in allowed:
                self.fail(1, column, f"unknown column (expected {','.join(allowed)!r})")
            if column in self.index:
                self.fail(1, column, "duplicate column")
            self.index[column] = i
        for column in required:
            if column not in self.index:
                self.fail(1, column, "missing required column")
        self._model_cache: dict[str, str] = {}

    def fail(self, line: int, column: str | None, reason: str) -> NoReturn:
        raise TraceFormatError(self.file, line, column, reason)

    def records(self) -> Iterator[tuple[int, list[str]]]:
        """Rows with the header's field count; anything else is a shifted, unreadable row."""
        width = self.width
        for line, row in self.rows:
            if len(row) != width:
                if not row:
                    self.fail(line, None, f"blank line (expected {width} fields)")
                if len(row) < width:
                    self.fail(
                        line, self.header[len(row)], f"expected {width} fields, got {len(row)}"
                    )
                self.fail(line, None, f"expected {width} fields, got {len(row)}")
            yield line, row

    def number(self, line: int, column: str, text: str) -> int:
        # isdigit alone accepts '²'; int() alone accepts ' 5', '+5', '1_0'. Both are needed.
        if text.isdigit() and text.isascii():
            return int(text)
        self.fail(line, column, _int_problem(text))

    def numbers(self, line: int, columns: Sequence[str], texts: Sequence[str]) -> list[int]:
        """Parse a row's required numbers at once: one check per row, not per cell, on the
        happy path; the per-cell path only runs to name the offending column."""
        joined = "".join(texts)
        if joined.isdigit() and joined.isascii() and "" not in texts:
            return list(map(int, texts))
        return [self.number(line, c, t) for c, t in zip(columns, texts, strict=True)]

    def gpu_model(self, line: int, column: str, name: str) -> str:
        cached = self._model_cache.get(name)
        if cached is not None:
            return cached
        try:
            model = check_gpu_model(name)
        except ValueError as exc:
            raise TraceFormatError(self.file, line, column, f"unknown GPU model {name!r}") from exc
        self._model_cache[name] = model
        return model

    def unique_name(self, line: int, column: str, name: str, seen: dict[str, int]) -> str:
        if name == "":
            self.fail(line, column, "missing name")
        first = seen.setdefault(name, line)
        if first != line:
            self.fail(line, column, f"duplicate name {name!r} (first on line {first})")
        return name


# --------------------------------------------------------------------------- readers

_NODE_INTS = ("cpu_milli", "memory_mib", "gpu")
_POD_INTS_SHORT = ("cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
_POD_INTS_FULL = (*_POD_INTS_SHORT, "creation_time")
_POD_EXTRA = ("gpu_spec", "qos", "pod_phase", "deletion_time", "scheduled_time")


def read_nodes(path: StrPath) -> list[TraceNode]:
    """Read an ``openb_node_list_*.csv`` file; raises TraceFormatError on any bad cell."""
    table = _Table(path, NODE_COLUMNS, NODE_COLUMNS)
    ix = table.index
    i_sn, i_model = ix["sn"], ix["model"]
    pick_ints = itemgetter(*(ix[c] for c in _NODE_INTS))
    seen: dict[str, int] = {}
    nodes: list[TraceNode] = []
    for line, row in table.records():
        name = table.unique_name(line, "sn", row[i_sn], seen)
        cpu, mem, gpus = table.numbers(line, _NODE_INTS, pick_ints(row))
        raw_model = row[i_model]
        model: str | None = None
        if gpus > 0:
            if raw_model == "":
                table.fail(line, "model", f"missing GPU model for a node with {gpus} GPUs")
            model = table.gpu_model(line, "model", raw_model)
        elif raw_model != "":
            table.fail(line, "model", f"GPU model {raw_model!r} given for a node with 0 GPUs")
        nodes.append(TraceNode(name, cpu, mem, gpus, model))
    return nodes


def read_pods(path: StrPath) -> list[TracePod]:
    """Read an ``openb_pod_list_*.csv`` file in the full or the short (5-column) layout.

    The layout comes from the header: once any full-layout column is present all of
    them must be, so a half-written export cannot pass as the short layout.
    """
    table = _Table(path, POD_COLUMNS_FULL, POD_COLUMNS_SHORT)
    ix = table.index
    full = any(c in ix for c in POD_COLUMNS_FULL[len(POD_COLUMNS_SHORT) :])
    if full:
        for column in POD_COLUMNS_FULL:
            if column not in ix:
                table.fail(1, column, "missing column of the full pod layout")
    int_columns = _POD_INTS_FULL if full else _POD_INTS_SHORT
    i_name = ix["name"]
    pick_ints = itemgetter(*(ix[c] for c in int_columns))
    pick_extra = itemgetter(*(ix[c] for c in _POD_EXTRA)) if full else None
    seen: dict[str, int] = {}
    pods: list[TracePod] = []
    for line, row in table.records():
        name = table.unique_name(line, "name", row[i_name], seen)
        ints = table.numbers(line, int_columns, pick_ints(row))
        cpu, mem, num_gpu, gpu_milli = ints[:4]
        _check_gpu_demand(table, line, num_gpu, gpu_milli)
        spec: tuple[str, ...] = ()
        qos: str | None = None
        phase: str | None = None
        created: int | None = None
        deleted: int | None = None
        scheduled: int | None = None
        if pick_extra is not None:
            raw_spec, raw_qos, raw_phase, raw_deleted, raw_scheduled = pick_extra(row)
            if raw_spec:
                spec = _gpu_spec(table, line, raw_spec)
            qos = raw_qos or None
            phase = raw_phase or None
            created = ints[4]
            if raw_deleted:
                deleted = table.number(line, "deletion_time", raw_deleted)
                if deleted < created:
                    table.fail(
                        line, "deletion_time", f"{deleted} is before creation_time {created}"
                    )
            if raw_scheduled:
                scheduled = table.number(line, "scheduled_time", raw_scheduled)
        pods.append(
            TracePod(
                name, cpu, mem, num_gpu, gpu_milli, spec, qos, phase, created, deleted, scheduled
            )
        )
    return pods


def _check_gpu_demand(table: _Table, line: int, num_gpu: int, gpu_milli: int) -> None:
    """Enforce the trace's encoding: a share only for 1-GPU pods, whole cards otherwise."""
    if gpu_milli > MAX_GPU_MILLI:
        table.fail(line, "gpu_milli", f"{gpu_milli} outside 0..{MAX_GPU_MILLI}")
    if num_gpu == 0:
        if gpu_milli != 0:
            table.fail(line, "gpu_milli", f"{gpu_milli} with num_gpu 0 (CPU pods need 0)")
    elif gpu_milli == 0:
        table.fail(line, "gpu_milli", f"0 with num_gpu {num_gpu} (GPU pods need 1..1000)")
    elif gpu_milli < MAX_GPU_MILLI and num_gpu != 1:
        table.fail(
            line,
            "gpu_milli",
            f"{gpu_milli} with num_gpu {num_gpu} (only 1-GPU pods share a GPU;"
            f" multi-GPU pods need {MAX_GPU_MILLI})",
        )


def _gpu_spec(table: _Table, line: int, raw: str) -> tuple[str, ...]:
    parts = raw.split("|")
    if "" in parts:
        table.fail(line, "gpu_spec", f"empty GPU model in {raw!r}")
    return tuple(table.gpu_model(line, "gpu_spec", part) for part in parts)
