"""Fuzzing the trace edge: node and pod list CSVs through the reader with a refusal log.

Rows mix valid values with hostile ones: past every bound (by one, by 10^12, by 5,000
digits), negative, garbage text, odd quoting, embedded newlines and quotes, bytes that are not
UTF-8, CRLF and a byte-order mark. The invariant for every file: no exception escapes the
reader; every row it emits has every value inside models.bounds and the models accept it;
every refusal has a reason and names the file and line; and where each row is one CSV record,
each row is either emitted or refused (never both, never neither) and a row built only of
valid cells is always emitted, whatever the rows around it.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from connectors.refusals import RefusalLog
from connectors.trace import TraceNode, TracePod, read_nodes, read_pods
from connectors.trace.alibaba_csv import NODE_COLUMNS, POD_COLUMNS_FULL
from models import Node, QosClass, ResourceRequest, TraceSettings
from models.bounds import CPU_MILLI_MAX, GPUS_MAX, MEMORY_MIB_MAX, TIME_MAX
from models.gpu import MILLI_PER_GPU
from models.refusal import Refusal
from tests.fuzzing import fuzz

SETTINGS = TraceSettings(max_line_bytes=16_384)
"""A line cap the generated rows meet both ways (a 5,000-digit cell fits, 20,000 x's do not)."""
SECONDS_MAX = int((TIME_MAX - SETTINGS.start).total_seconds())
"""Computed here, not taken from the reader: the latest second the models accept."""
MODELS = ["T4", "P100", "V100M16", "V100M32", "A10", "G2", "G3", "H100"]
SPECIAL = ',"\r\n'
GARBAGE = st.one_of(
    st.sampled_from(
        [
            *("", "-1", "-0", "1.5", "1e3", " 5", "5 ", "+5", "0x10", "1_000", "\u00b2", "\u0665"),
            *("NaN", "inf", '"', '""', '"5"', "\x00", "\r", "\n", "\ufeff7", ",", "|", "T4|"),
            *("9" * 30, "0" * 4999 + "1", "9" * 5000, "-" + "9" * 5000, "x" * 20_000),
            *("LS", "dup", "x-clone-1"),
        ]
    ),
    st.text(max_size=8),
    st.integers(min_value=-(2**80), max_value=2**80).map(str),
)


@dataclass(frozen=True)
class Cell:
    text: str
    ok: bool
    """Drawn from the valid values; one that is not may still happen to be valid."""


@dataclass(frozen=True)
class Row:
    cells: list[Cell]
    ok: bool


def _cell(good: st.SearchStrategy[str], bad: st.SearchStrategy[str]) -> st.SearchStrategy[Cell]:
    return st.one_of(good.map(lambda t: Cell(t, True)), bad.map(lambda t: Cell(t, False)))


def _bad_number(maximum: int) -> st.SearchStrategy[str]:
    return st.one_of(
        st.just(str(maximum + 1)),
        st.integers(maximum + 1, maximum * 10**12).map(str),
        st.integers(max_value=-1).map(str),
        GARBAGE,
    )


def _number(maximum: int) -> st.SearchStrategy[Cell]:
    return _cell(st.integers(0, maximum).map(str), _bad_number(maximum))


# Built once: a strategy built inside a draw is validated again at every draw, which made
# generating the examples cost several times reading them.
CPU, MEMORY, GPUS = _number(CPU_MILLI_MAX), _number(MEMORY_MIB_MAX), _number(GPUS_MAX)
SECONDS = _number(SECONDS_MAX)
MODEL = _cell(st.sampled_from(MODELS), GARBAGE)
NO_MODEL = _cell(st.just(""), st.one_of(st.sampled_from(MODELS), GARBAGE))
NAME = st.one_of(st.just(None), GARBAGE)
DEMAND = st.one_of(
    st.just(("0", "0")),
    st.integers(1, MILLI_PER_GPU).map(lambda m: ("1", str(m))),
    st.integers(1, GPUS_MAX).map(lambda n: (str(n), str(MILLI_PER_GPU))),
)
BAD_DEMAND = st.tuples(
    st.one_of(_bad_number(GPUS_MAX), st.integers(0, GPUS_MAX).map(str)),
    st.one_of(_bad_number(MILLI_PER_GPU), st.integers(0, MILLI_PER_GPU).map(str)),
)
SPEC = _cell(st.lists(st.sampled_from(MODELS), max_size=3).map("|".join), GARBAGE)
QOS = _cell(st.sampled_from(["", *(q.value for q in QosClass)]), GARBAGE)
PHASE = _cell(st.sampled_from(["", "Running", "Pending", "Failed"]), GARBAGE)
LATER = st.one_of(st.none(), st.integers(0, SECONDS_MAX))
"""How long after creation a pod is deleted (None: blank), folded into the time range."""
BAD_TIME = _bad_number(SECONDS_MAX)
SCHEDULED = _cell(st.one_of(st.just(""), st.integers(0, SECONDS_MAX).map(str)), GARBAGE)


def _name(draw: st.DrawFn, good: str) -> Cell:
    bad = draw(NAME)
    return Cell(good, True) if bad is None else Cell(bad, False)


@st.composite
def node_row(draw: st.DrawFn, i: int) -> Row:
    name = _name(draw, f"good-node-{i}")
    cpu, mem, gpu = draw(CPU), draw(MEMORY), draw(GPUS)
    model = draw(MODEL if gpu.ok and gpu.text != "0" else NO_MODEL)
    cells = [name, cpu, mem, gpu, model]
    return Row(cells, all(c.ok for c in cells))


@st.composite
def pod_row(draw: st.DrawFn, i: int) -> Row:
    name = _name(draw, f"good-pod-{i}")
    cpu, mem = draw(CPU), draw(MEMORY)
    demand_ok = draw(st.booleans())
    num_gpu, gpu_milli = draw(DEMAND if demand_ok else BAD_DEMAND)
    spec, qos, phase, created = draw(SPEC), draw(QOS), draw(PHASE), draw(SECONDS)
    if draw(st.booleans()):
        later = draw(LATER)
        after = int(created.text) if created.ok else 0
        text = "" if later is None else str(after + later % (SECONDS_MAX - after + 1))
        deleted = Cell(text, True)
    else:
        deleted = Cell(draw(BAD_TIME), False)
    scheduled = draw(SCHEDULED)
    demand = [Cell(num_gpu, demand_ok), Cell(gpu_milli, demand_ok)]
    cells = [name, cpu, mem, *demand, spec, qos, phase, created, deleted, scheduled]
    return Row(cells, all(c.ok for c in cells))


@dataclass(frozen=True)
class TraceFile:
    data: bytes
    rows: list[Row]
    one_line_each: bool
    """No cell holds a comma, quote or line break: line i + 2 is row i."""
    one_record_each: bool
    """Each row is one CSV record (possibly over several lines), so rows can be counted."""


ROWS = range(7)
NODE_ROWS = [node_row(i) for i in ROWS]
POD_ROWS = [pod_row(i) for i in ROWS]
"""Each row's strategy built once: one built per draw is validated again each time."""


@st.composite
def trace_file(draw: st.DrawFn, kind: str) -> TraceFile:
    row = NODE_ROWS if kind == "nodes" else POD_ROWS
    rows = [draw(row[i]) for i in range(draw(st.integers(0, 6)))]
    quote_all = draw(st.booleans())
    eol = draw(st.sampled_from(["\n", "\r\n"]))
    header = ",".join(NODE_COLUMNS if kind == "nodes" else POD_COLUMNS_FULL)
    lines = [("\ufeff" if draw(st.booleans()) else "") + header]
    for r in rows:
        texts = [c.text for c in r.cells]
        if quote_all:
            out = io.StringIO()
            csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="").writerow(texts)
            lines.append(out.getvalue())
        else:
            lines.append(",".join(texts))
    data = [(line + eol).encode() for line in lines]
    one_line = not any(ch in c.text for r in rows for c in r.cells for ch in SPECIAL)
    corrupt = bool(rows) and draw(st.booleans())
    if corrupt:  # one row that is not UTF-8
        k = draw(st.integers(1, len(rows)))
        data[k] = b"\xe9" + data[k]
        rows[k - 1] = Row(rows[k - 1].cells, False)
    return TraceFile(b"".join(data), rows, one_line, one_line or (quote_all and not corrupt))


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz") / "trace.csv"


def _refusal_log() -> tuple[RefusalLog, list[Refusal]]:
    kept: list[Refusal] = []
    return RefusalLog(registry=CollectorRegistry(), sink=kept.append), kept


def _check_accounting(path: Path, f: TraceFile, names: list[str], kept: list[Refusal]) -> None:
    lines = []
    for r in kept:
        assert r.source == "trace" and r.reason and r.reason != "internal_error", r
        assert r.detail.startswith(f"{path}:"), r.detail
        lines.append(int(r.detail[len(str(path)) + 1 :].split(":", 1)[0]))
    assert len(set(lines)) == len(lines)  # one refusal per record at most
    if f.one_record_each:
        assert len(names) + len(kept) == len(f.rows)
        for i, row in enumerate(f.rows):
            if row.ok:
                assert row.cells[0].text in names, (i, row.cells)
    if f.one_line_each:
        assert not {i + 2 for i, row in enumerate(f.rows) if row.ok} & set(lines)


@fuzz
@given(f=trace_file("nodes"))
def test_node_rows_are_in_range_or_refused(scratch: Path, f: TraceFile) -> None:
    scratch.write_bytes(f.data)
    log, kept = _refusal_log()
    nodes: list[TraceNode] = read_nodes(scratch, refusals=log, settings=SETTINGS)
    for n in nodes:
        assert 0 <= n.cpu_milli <= CPU_MILLI_MAX
        assert 0 <= n.memory_mib <= MEMORY_MIB_MAX
        assert 0 <= n.gpu_count <= GPUS_MAX
        Node(
            name=n.name,
            cpu_milli=n.cpu_milli,
            memory_mib=n.memory_mib,
            gpu_count=n.gpu_count,
            gpu_model=n.gpu_model,
        )
    assert len({n.name for n in nodes}) == len(nodes)
    _check_accounting(scratch, f, [n.name for n in nodes], kept)


@fuzz
@given(f=trace_file("pods"))
def test_pod_rows_are_in_range_or_refused(scratch: Path, f: TraceFile) -> None:
    scratch.write_bytes(f.data)
    log, kept = _refusal_log()
    pods: list[TracePod] = read_pods(scratch, refusals=log, settings=SETTINGS)
    for p in pods:
        assert 0 <= p.cpu_milli <= CPU_MILLI_MAX
        assert 0 <= p.memory_mib <= MEMORY_MIB_MAX
        assert 0 <= p.num_gpu <= GPUS_MAX
        assert 0 <= p.gpu_milli <= MILLI_PER_GPU
        ResourceRequest(
            cpu_milli=p.cpu_milli,
            memory_mib=p.memory_mib,
            gpu_count=p.num_gpu,
            gpu_milli=p.gpu_milli,
        )
        assert p.qos is None or p.qos in {q.value for q in QosClass}
        assert p.creation_time is not None
        for t in (p.creation_time, p.deletion_time, p.scheduled_time):
            assert t is None or SETTINGS.start + timedelta(seconds=t) <= TIME_MAX
        assert p.deletion_time is None or p.deletion_time >= p.creation_time
    assert len({p.name for p in pods}) == len(pods)
    _check_accounting(scratch, f, [p.name for p in pods], kept)
