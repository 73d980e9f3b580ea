"""Strict reader for Alibaba ``cluster-trace-gpu-v2023`` node and pod lists.

Fragmentation results are only as good as the trace that feeds them, so every value is checked
against the ranges the models accept (models.bounds) and nothing is coerced or clamped. Each row
is judged on its own: without a refusal log the first bad row stops the read with the file, line
and column to fix; with one, every bad row is refused there (reason code, the cell, the line as
read) and the rest are returned, so a caller can report all of them at once or run without them.
"""

from __future__ import annotations

import logging
import operator
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import NoReturn, TypeVar

from connectors.refusals import RefusalLog
from connectors.trace.records import Record, TraceFormatError, records
from models.bounds import CPU_MILLI_MAX, GPUS_MAX, MEMORY_MIB_MAX, TIME_MAX
from models.gpu import MILLI_PER_GPU, check_gpu_model
from models.pod import QosClass
from models.settings import TraceSettings

__all__ = [
    "MAX_GPU_MILLI",
    "NODE_COLUMNS",
    "POD_COLUMNS_FULL",
    "POD_COLUMNS_SHORT",
    "REFUSAL_SOURCE",
    "RESERVED_NAME_PART",
    "TraceFormatError",
    "TraceNode",
    "TracePod",
    "read_nodes",
    "read_pods",
    "trace_seconds_max",
]

log = logging.getLogger(__name__)

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
MAX_GPU_MILLI = MILLI_PER_GPU
REFUSAL_SOURCE = "trace"
RESERVED_NAME_PART = "-clone-"
"""The FGD protocol pads a workload with clones named ``<pod>-clone-<k>`` and finds a clone's
pod by that name: a trace pod named like a clone would be mistaken for one."""
_QOS = frozenset(q.value for q in QosClass)
_FAST_DIGITS = 64  # a row's numbers longer than this together take the per-cell path

StrPath = str | os.PathLike[str]
T = TypeVar("T")


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


def trace_seconds_max(settings: TraceSettings) -> int:
    """Latest trace second whose instant (``settings.start`` + it) the models still accept."""
    return int((TIME_MAX - settings.start).total_seconds())


# --------------------------------------------------------------------------- helpers


def _shown(text: str) -> str:
    # A cell can be 64 KB; a reason names it, it does not repeat it.
    return text if len(text) <= 40 else text[:37] + "..."


def _int_problem(text: str) -> tuple[str, str]:
    if text == "":
        return "missing number", "missing_value"
    body = text[1:]
    if text[0] == "-" and body.isascii() and body.isdigit():
        return f"negative number {_shown(text)}", "negative"
    return f"not a non-negative integer: {_shown(text)!r}", "not_a_number"


class _Table:
    """Header-resolved view of one file, so per-row code can fail with full context."""

    def __init__(
        self,
        path: StrPath,
        allowed: Sequence[str],
        required: Sequence[str],
        *,
        settings: TraceSettings | None,
        refusals: RefusalLog | None,
    ) -> None:
        self.file = os.fspath(path)
        self.refusals = refusals
        limits = settings or TraceSettings()
        self.rows: Iterator[Record] = records(
            path, max_file_bytes=limits.max_file_bytes, max_line_bytes=limits.max_line_bytes
        )
        self.time_max = trace_seconds_max(limits)
        first = next(self.rows, None)
        if first is None:
            self.fail(1, None, f"empty file; expected header {','.join(required)!r}", "empty_file")
        if isinstance(first.fields, TraceFormatError):
            raise first.fields  # an unreadable header leaves no row to judge
        header = first.fields
        self.header = header
        self.width = len(header)
        self.index: dict[str, int] = {}
        for i, column in enumerate(header):
            if column not in allowed:
                expected = ",".join(allowed)
                self.fail(1, _shown(column), f"unknown column (expected {expected!r})", "header")
            if column in self.index:
                self.fail(1, column, "duplicate column", "header")
            self.index[column] = i
        for column in required:
            if column not in self.index:
                self.fail(1, column, "missing required column", "header")
        self._model_cache: dict[str, str] = {}

    def fail(self, line: int, column: str | None, reason: str, code: str) -> NoReturn:
        raise TraceFormatError(self.file, line, column, reason, code)

    def each(self, parse: Callable[[int, list[str]], T], *, max_rows: int, setting: str) -> list[T]:
        """Every row parsed on its own; a bad one raises, or is refused and left out. More
        than ``max_rows`` kept stops the read, whatever the refusal log: a list that big is
        the wrong file, or would run for hours."""
        out: list[T] = []
        for rec in self.rows:
            if len(out) >= max_rows:
                reason = f"more than {max_rows} rows ({setting})"
                raise TraceFormatError(self.file, None, None, reason, "too_many_rows")
            try:
                fields = rec.fields
                if isinstance(fields, TraceFormatError):
                    raise fields
                if len(fields) != self.width:
                    self._wrong_width(rec.line, fields)
                out.append(parse(rec.line, fields))
            except TraceFormatError as err:
                if self.refusals is None:
                    raise
                self._refuse(err, rec.raw)
            except Exception as exc:  # a bug of ours costs the row, not the rest of the file
                if self.refusals is None:
                    raise
                log.exception("%s:%d: could not read the row", self.file, rec.line)
                reason = f"could not be read ({type(exc).__name__})"
                self._refuse(
                    TraceFormatError(self.file, rec.line, None, reason, "internal_error"), rec.raw
                )
        return out

    def _refuse(self, err: TraceFormatError, raw: str) -> None:
        assert self.refusals is not None
        self.refusals.refuse(source=REFUSAL_SOURCE, reason=err.code, detail=str(err), raw=raw)

    def _wrong_width(self, line: int, row: list[str]) -> NoReturn:
        """A row with another field count is a shifted, unreadable row."""
        width = self.width
        if not row:
            self.fail(line, None, f"blank line (expected {width} fields)", "field_count")
        if len(row) < width:
            column = self.header[len(row)]
            self.fail(line, column, f"expected {width} fields, got {len(row)}", "field_count")
        self.fail(line, None, f"expected {width} fields, got {len(row)}", "field_count")

    def number(self, line: int, column: str, text: str, maximum: int) -> int:
        # isdigit alone accepts '²'; int() alone accepts ' 5', '+5', '1_0'. Both are needed.
        if text.isascii() and text.isdigit():
            # int() refuses strings past 4,300 digits; a digit count above the bound's is
            # out of range already, so no length reaches it.
            digits = text.lstrip("0") or "0"
            if len(digits) <= len(str(maximum)) and int(digits) <= maximum:
                return int(digits)
            self.fail(line, column, f"{_shown(text)} outside 0..{maximum}", "out_of_range")
        reason, code = _int_problem(text)
        self.fail(line, column, reason, code)

    def numbers(
        self, line: int, columns: Sequence[str], texts: Sequence[str], maxima: Sequence[int]
    ) -> list[int]:
        """Parse a row's required numbers at once: one check per row, not per cell, on the
        happy path; the per-cell path only runs to name the offending column."""
        joined = "".join(texts)
        fast = joined.isascii() and joined.isdigit() and len(joined) <= _FAST_DIGITS
        if fast and "" not in texts:
            values = list(map(int, texts))
            if all(map(operator.le, values, maxima)):
                return values
        return [self.number(line, c, t, m) for c, t, m in zip(columns, texts, maxima, strict=True)]

    def gpu_model(self, line: int, column: str, name: str) -> str:
        cached = self._model_cache.get(name)
        if cached is not None:
            return cached
        try:
            model = check_gpu_model(name)
        except ValueError:
            self.fail(line, column, f"not a GPU model name: {_shown(name)!r}", "gpu_model_name")
        self._model_cache[name] = model
        return model

    def name(self, line: int, column: str, name: str, seen: dict[str, int]) -> str:
        """A row's name; ``seen`` holds the names of rows kept so far (a refused row's name
        is free for a later row)."""
        if name == "":
            self.fail(line, column, "missing name", "missing_value")
        first = seen.get(name)
        if first is not None:
            self.fail(
                line,
                column,
                f"duplicate name {_shown(name)!r} (first on line {first})",
                "duplicate_name",
            )
        return name


# --------------------------------------------------------------------------- readers

_NODE_INTS = ("cpu_milli", "memory_mib", "gpu")
_NODE_MAXIMA = (CPU_MILLI_MAX, MEMORY_MIB_MAX, GPUS_MAX)
_POD_INTS_SHORT = ("cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
_POD_MAXIMA_SHORT = (CPU_MILLI_MAX, MEMORY_MIB_MAX, GPUS_MAX, MILLI_PER_GPU)
_POD_INTS_FULL = (*_POD_INTS_SHORT, "creation_time")
_POD_EXTRA = ("gpu_spec", "qos", "pod_phase", "deletion_time", "scheduled_time")


def read_nodes(
    path: StrPath,
    *,
    refusals: RefusalLog | None = None,
    settings: TraceSettings | None = None,
) -> list[TraceNode]:
    """Read an ``openb_node_list_*.csv`` file.

    Without ``refusals`` the first bad row raises TraceFormatError; with it, bad rows are
    refused there and left out. A problem of the whole file (size, header) always raises.
    ``settings`` gives the size caps (default: TraceSettings's defaults).
    """
    table = _Table(path, NODE_COLUMNS, NODE_COLUMNS, settings=settings, refusals=refusals)
    ix = table.index
    i_sn, i_model = ix["sn"], ix["model"]
    pick_ints = itemgetter(*(ix[c] for c in _NODE_INTS))
    seen: dict[str, int] = {}

    def node(line: int, row: list[str]) -> TraceNode:
        name = table.name(line, "sn", row[i_sn], seen)
        cpu, mem, gpus = table.numbers(line, _NODE_INTS, pick_ints(row), _NODE_MAXIMA)
        raw_model = row[i_model]
        model: str | None = None
        if gpus > 0:
            if raw_model == "":
                table.fail(
                    line, "model", f"missing GPU model for a node with {gpus} GPUs", "gpu_model"
                )
            model = table.gpu_model(line, "model", raw_model)
        elif raw_model != "":
            shown = _shown(raw_model)
            table.fail(
                line, "model", f"GPU model {shown!r} given for a node with 0 GPUs", "gpu_model"
            )
        seen[name] = line
        return TraceNode(name, cpu, mem, gpus, model)

    limits = settings or TraceSettings()
    nodes = table.each(node, max_rows=limits.max_nodes, setting="GPUFRAG_TRACE__MAX_NODES")
    gpus = sum(n.gpu_count for n in nodes)
    if gpus > limits.max_gpus:
        reason = f"{gpus} GPUs in all, more than {limits.max_gpus} (GPUFRAG_TRACE__MAX_GPUS)"
        raise TraceFormatError(table.file, None, None, reason, "too_many_gpus")
    return nodes


def read_pods(
    path: StrPath,
    *,
    refusals: RefusalLog | None = None,
    settings: TraceSettings | None = None,
) -> list[TracePod]:
    """Read an ``openb_pod_list_*.csv`` file in the full or the short (5-column) layout.

    The layout comes from the header: once any full-layout column is present all of
    them must be, so a half-written export cannot pass as the short layout. Bad rows and
    ``refusals``/``settings`` as in read_nodes; trace seconds are bounded so that
    ``settings.start`` plus any of them is an instant the models accept.
    """
    table = _Table(path, POD_COLUMNS_FULL, POD_COLUMNS_SHORT, settings=settings, refusals=refusals)
    ix = table.index
    full = any(c in ix for c in POD_COLUMNS_FULL[len(POD_COLUMNS_SHORT) :])
    if full:
        for column in POD_COLUMNS_FULL:
            if column not in ix:
                table.fail(1, column, "missing column of the full pod layout", "header")
    int_columns = _POD_INTS_FULL if full else _POD_INTS_SHORT
    maxima = (*_POD_MAXIMA_SHORT, table.time_max) if full else _POD_MAXIMA_SHORT
    i_name = ix["name"]
    pick_ints = itemgetter(*(ix[c] for c in int_columns))
    pick_extra = itemgetter(*(ix[c] for c in _POD_EXTRA)) if full else None
    seen: dict[str, int] = {}

    def pod(line: int, row: list[str]) -> TracePod:
        name = table.name(line, "name", row[i_name], seen)
        if RESERVED_NAME_PART in name:
            reason = f"{RESERVED_NAME_PART!r} in a name is kept for the FGD protocol's clones"
            table.fail(line, "name", reason, "reserved_name")
        ints = table.numbers(line, int_columns, pick_ints(row), maxima)
        cpu, mem, num_gpu, gpu_milli = ints[:4]
        _check_gpu_demand(table, line, num_gpu, gpu_milli)
        extra: _Extra = (), None, None, None, None, None
        if pick_extra is not None:
            extra = _full_layout(table, line, pick_extra(row), ints[4])
        seen[name] = line
        return TracePod(name, cpu, mem, num_gpu, gpu_milli, *extra)

    max_pods = (settings or TraceSettings()).max_pods
    return table.each(pod, max_rows=max_pods, setting="GPUFRAG_TRACE__MAX_PODS")


_Extra = tuple[tuple[str, ...], str | None, str | None, int | None, int | None, int | None]


def _full_layout(table: _Table, line: int, cells: Sequence[str], created: int) -> _Extra:
    """gpu_spec, qos, phase and the three times of a full-layout row."""
    raw_spec, raw_qos, raw_phase, raw_deleted, raw_scheduled = cells
    spec = _gpu_spec(table, line, raw_spec) if raw_spec else ()
    if raw_qos and raw_qos not in _QOS:
        known = ", ".join(sorted(_QOS))
        table.fail(
            line, "qos", f"unknown QoS class {_shown(raw_qos)!r} (known: {known})", "unknown_qos"
        )
    deleted: int | None = None
    if raw_deleted:
        deleted = table.number(line, "deletion_time", raw_deleted, table.time_max)
        if deleted < created:
            table.fail(
                line, "deletion_time", f"{deleted} is before creation_time {created}", "time_order"
            )
    scheduled = None
    if raw_scheduled:
        scheduled = table.number(line, "scheduled_time", raw_scheduled, table.time_max)
    return spec, raw_qos or None, raw_phase or None, created, deleted, scheduled


def _check_gpu_demand(table: _Table, line: int, num_gpu: int, gpu_milli: int) -> None:
    """Enforce the trace's encoding: a share only for 1-GPU pods, whole cards otherwise."""
    if num_gpu == 0:
        if gpu_milli != 0:
            table.fail(
                line, "gpu_milli", f"{gpu_milli} with num_gpu 0 (CPU pods need 0)", "gpu_demand"
            )
    elif gpu_milli == 0:
        table.fail(
            line, "gpu_milli", f"0 with num_gpu {num_gpu} (GPU pods need 1..1000)", "gpu_demand"
        )
    elif gpu_milli < MAX_GPU_MILLI and num_gpu != 1:
        table.fail(
            line,
            "gpu_milli",
            f"{gpu_milli} with num_gpu {num_gpu} (only 1-GPU pods share a GPU;"
            f" multi-GPU pods need {MAX_GPU_MILLI})",
            "gpu_demand",
        )


def _gpu_spec(table: _Table, line: int, raw: str) -> tuple[str, ...]:
    parts = raw.split("|")
    if "" in parts:
        table.fail(line, "gpu_spec", f"empty GPU model in {_shown(raw)!r}", "gpu_model_name")
    return tuple(table.gpu_model(line, "gpu_spec", part) for part in parts)
