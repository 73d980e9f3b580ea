"""The trace reader's bounds and per-row isolation: every out-of-range or unreadable row is
refused with a stable reason code and a detail naming file, line and column; the other rows
are read as if it were not there. Without a refusal log the first such row still raises."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from connectors.refusals import RefusalLog
from connectors.trace import TraceFormatError, TraceNode, read_nodes, read_pods
from connectors.trace.alibaba_csv import (
    NODE_COLUMNS,
    POD_COLUMNS_FULL,
    POD_COLUMNS_SHORT,
    trace_seconds_max,
)
from models import TraceSettings
from models.bounds import CPU_MILLI_MAX, GPUS_MAX, MEMORY_MIB_MAX, TIME_MAX
from models.refusal import Refusal

NODE_HEADER = ",".join(NODE_COLUMNS)
POD_HEADER = ",".join(POD_COLUMNS_FULL)
GOOD_NODE = "node-a,96000,393216,8,G2"
GOOD_POD = "pod-a,4000,8192,1,500,,LS,Running,10,20,11"


def _write(tmp_path: Path, name: str, *lines: str) -> Path:
    path = tmp_path / name
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def _log() -> tuple[RefusalLog, list[Refusal]]:
    kept: list[Refusal] = []
    return RefusalLog(registry=CollectorRegistry(), sink=kept.append), kept


def _pod(**cells: str) -> str:
    row = dict(zip(POD_COLUMNS_FULL, GOOD_POD.split(","), strict=True)) | {"name": "pod-b"}
    return ",".join((row | cells).values())


NODE_CASES = [
    # row (line 3), reason code, column, detail fragment
    ("node-b,96000,393216,65,G2", "out_of_range", "gpu", f"65 outside 0..{GPUS_MAX}"),
    ("node-b,96000,393216,1000000000,G2", "out_of_range", "gpu", "1000000000 outside"),
    ("node-b,96000,393216," + "1" * 31 + ",G2", "out_of_range", "gpu", "outside 0..64"),
    ("node-b,96000,393216," + "9" * 5000 + ",G2", "out_of_range", "gpu", "9... outside 0..64"),
    ("node-b,96000,393216,00000000000000000000008,G2", None, None, None),
    (f"node-b,{CPU_MILLI_MAX + 1},1,0,", "out_of_range", "cpu_milli", "outside 0..4096000"),
    (f"node-b,1,{MEMORY_MIB_MAX + 1},0,", "out_of_range", "memory_mib", "outside 0..67108864"),
    ("node-b,-96000,393216,2,G2", "negative", "cpu_milli", "negative number -96000"),
    ("node-b,abc,393216,2,G2", "not_a_number", "cpu_milli", "'abc'"),
    ("node-b,,393216,2,G2", "missing_value", "cpu_milli", "missing number"),
    (",1,1,0,", "missing_value", "sn", "missing name"),
    ("node-a,1,1,0,", "duplicate_name", "sn", "first on line 2"),
    ("node-b,1,1,2,X 999", "gpu_model_name", "model", "'X 999'"),
    ("node-b,1,1,2,", "gpu_model", "model", "missing GPU model"),
    ("node-b,1,1,0,T4", "gpu_model", "model", "given for a node with 0 GPUs"),
    ("node-b,1,1,0", "field_count", "model", "expected 5 fields, got 4"),
    ("", "field_count", None, "blank line"),
    ('"node-b"x,1,1,0,', "malformed_csv", None, "malformed CSV"),
]


@pytest.mark.parametrize(("row", "code", "column", "fragment"), NODE_CASES)
def test_node_row_refused_with_reason(
    tmp_path: Path, row: str, code: str | None, column: str | None, fragment: str | None
) -> None:
    path = _write(tmp_path, "nodes.csv", NODE_HEADER, GOOD_NODE, row, "node-c,1,1,0,")
    log, kept = _log()
    nodes = read_nodes(path, refusals=log)
    if code is None:  # leading zeros are still the number: nothing to refuse
        assert [n.gpu_count for n in nodes] == [8, 8, 0] and not kept
        return
    assert [n.name for n in nodes] == ["node-a", "node-c"]  # the rows around it are untouched
    (refusal,) = kept
    assert refusal.source == "trace" and refusal.reason == code
    where = f"{path}:3: column {column!r}: " if column else f"{path}:3: "
    assert refusal.detail.startswith(where), refusal.detail
    assert fragment is not None and fragment in refusal.detail
    assert len(refusal.detail) < 300  # a 5,000-digit cell is named, not repeated
    assert refusal.raw == row
    assert log.counts == {("trace", code): 1}
    with pytest.raises(TraceFormatError) as exc:  # the strict reader stops at the same row
        read_nodes(path)
    assert (exc.value.line, exc.value.column, exc.value.code) == (3, column, code)


POD_CASES = [
    (_pod(cpu_milli=str(CPU_MILLI_MAX + 1)), "out_of_range", "cpu_milli"),
    (_pod(cpu_milli="99999999999"), "out_of_range", "cpu_milli"),
    (_pod(memory_mib="-1"), "negative", "memory_mib"),
    (_pod(num_gpu="65", gpu_milli="1000"), "out_of_range", "num_gpu"),
    (_pod(gpu_milli="1001"), "out_of_range", "gpu_milli"),
    (_pod(num_gpu="2", gpu_milli="500"), "gpu_demand", "gpu_milli"),
    (_pod(creation_time="1e3"), "not_a_number", "creation_time"),
    (_pod(creation_time="99999999999999"), "out_of_range", "creation_time"),
    (_pod(deletion_time="99999999999999"), "out_of_range", "deletion_time"),
    (_pod(scheduled_time="99999999999999"), "out_of_range", "scheduled_time"),
    (_pod(creation_time="30", deletion_time="20"), "time_order", "deletion_time"),
    (_pod(qos="Platinum"), "unknown_qos", "qos"),
    (_pod(gpu_spec="T4|"), "gpu_model_name", "gpu_spec"),
    (_pod(name="pod-a"), "duplicate_name", "name"),
    (_pod(name="pod-a-clone-0"), "reserved_name", "name"),
]


@pytest.mark.parametrize(("row", "code", "column"), POD_CASES)
def test_pod_row_refused_with_reason(tmp_path: Path, row: str, code: str, column: str) -> None:
    path = _write(tmp_path, "pods.csv", POD_HEADER, GOOD_POD, row, _pod(name="pod-c"))
    log, kept = _log()
    assert [p.name for p in read_pods(path, refusals=log)] == ["pod-a", "pod-c"]
    (refusal,) = kept
    assert refusal.reason == code
    assert refusal.detail.startswith(f"{path}:3: column {column!r}: "), refusal.detail
    assert refusal.raw == row


def test_every_bad_row_is_refused_and_counted(tmp_path: Path) -> None:
    rows = [f"n{i},1,1,{GPUS_MAX + 1 + i},G2" for i in range(5)] + ["n9,1,1,-1,G2", GOOD_NODE]
    path = _write(tmp_path, "nodes.csv", NODE_HEADER, *rows)
    log, kept = _log()
    assert read_nodes(path, refusals=log) == [TraceNode("node-a", 96000, 393216, 8, "G2")]
    assert [r.reason for r in kept] == ["out_of_range"] * 5 + ["negative"]
    assert [r.detail.split(":")[1] for r in kept] == ["2", "3", "4", "5", "6", "7"]
    assert log.counts == {("trace", "out_of_range"): 5, ("trace", "negative"): 1}


def test_a_refused_rows_name_is_free_for_a_later_row(tmp_path: Path) -> None:
    path = _write(tmp_path, "nodes.csv", NODE_HEADER, "node-a,1,1,99,G2", GOOD_NODE)
    log, kept = _log()
    assert [n.gpu_count for n in read_nodes(path, refusals=log)] == [8]
    assert [r.reason for r in kept] == ["out_of_range"]


def test_bounds_are_inclusive(tmp_path: Path) -> None:
    top = trace_seconds_max(TraceSettings())
    path = _write(
        tmp_path,
        "pods.csv",
        POD_HEADER,
        f"p,{CPU_MILLI_MAX},{MEMORY_MIB_MAX},{GPUS_MAX},1000,,,,0,{top},{top}",
    )
    (pod,) = read_pods(path)
    assert (pod.cpu_milli, pod.memory_mib, pod.num_gpu, pod.deletion_time) == (
        CPU_MILLI_MAX,
        MEMORY_MIB_MAX,
        GPUS_MAX,
        top,
    )
    assert TraceSettings().start + timedelta(seconds=top) <= TIME_MAX


def test_time_bound_follows_the_trace_start(tmp_path: Path) -> None:
    """Trace seconds count from GPUFRAG_TRACE__START: a later start leaves fewer of them."""
    late = TraceSettings(start=datetime(2261, 12, 30, tzinfo=UTC))
    assert trace_seconds_max(late) == 86400
    path = _write(
        tmp_path,
        "pods.csv",
        POD_HEADER,
        _pod(deletion_time="86400"),
        _pod(name="x", deletion_time="86401"),
    )
    log, kept = _log()
    assert [p.name for p in read_pods(path, refusals=log, settings=late)] == ["pod-b"]
    assert [r.reason for r in kept] == ["out_of_range"]
    assert "86401 outside 0..86400" in kept[0].detail


def test_short_layout_has_no_times_to_bound(tmp_path: Path) -> None:
    path = _write(
        tmp_path, "short.csv", ",".join(POD_COLUMNS_SHORT), "p,1,1,64,1000", "q,1,1,65,1000"
    )
    log, kept = _log()
    assert [p.name for p in read_pods(path, refusals=log)] == ["p"]
    assert kept[0].detail.endswith("column 'num_gpu': 65 outside 0..64")


def test_file_over_the_size_cap_is_refused_before_reading(tmp_path: Path) -> None:
    path = _write(tmp_path, "nodes.csv", NODE_HEADER, GOOD_NODE)
    size = path.stat().st_size
    assert read_nodes(path, settings=TraceSettings(max_file_bytes=size)) != []
    log, kept = _log()
    with pytest.raises(TraceFormatError) as exc:
        read_nodes(path, refusals=log, settings=TraceSettings(max_file_bytes=size - 1))
    assert exc.value.code == "file_too_large" and exc.value.line is None
    assert str(exc.value) == (
        f"{path}: {size} bytes, over the {size - 1}-byte limit (GPUFRAG_TRACE__MAX_FILE_BYTES)"
    )
    assert not kept  # a whole-file problem is the command's to report, not a row's


def test_a_file_without_a_size_stops_at_the_cap() -> None:
    """/dev/zero has size 0 and never ends: the bytes read are capped as well."""
    with pytest.raises(TraceFormatError) as exc:
        read_nodes("/dev/zero", settings=TraceSettings(max_file_bytes=1 << 20))
    assert exc.value.code == "file_too_large"


def test_a_long_line_is_refused_without_holding_it(tmp_path: Path) -> None:
    settings = TraceSettings(max_line_bytes=100)
    long_row = "node-b," + "9" * 500 + ",1,0,"
    path = _write(tmp_path, "nodes.csv", NODE_HEADER, long_row, GOOD_NODE)
    log, kept = _log()
    assert [n.name for n in read_nodes(path, refusals=log, settings=settings)] == ["node-a"]
    (refusal,) = kept
    assert refusal.reason == "line_too_long"
    assert refusal.detail == f"{path}:2: line longer than 100 bytes (GPUFRAG_TRACE__MAX_LINE_BYTES)"
    assert refusal.raw == long_row[:100]
    header_too_long = _write(tmp_path, "wide.csv", NODE_HEADER + "," + "x" * 200, GOOD_NODE)
    with pytest.raises(TraceFormatError) as exc:  # a header that cannot be read: the file's
        read_nodes(header_too_long, refusals=log, settings=settings)
    assert exc.value.code == "line_too_long" and exc.value.line == 1


def test_undecodable_and_runaway_rows_cost_only_themselves(tmp_path: Path) -> None:
    path = tmp_path / "nodes.csv"
    path.write_bytes(
        f"{NODE_HEADER}\nn\xe9ud,1,1,0,\n{GOOD_NODE}\n".encode("latin-1")
        + b'"open,1,1,0,\nnode-z,1,1,0,\n'
    )
    log, kept = _log()
    assert [n.name for n in read_nodes(path, refusals=log)] == ["node-a"]
    assert [(r.reason, r.detail.split(":")[1]) for r in kept] == [
        ("not_utf8", "2"),
        ("malformed_csv", "4"),
    ]
    assert "record spans lines 4-5" in kept[1].detail
    assert kept[0].raw == "n\ufffdud,1,1,0,"


def test_binary_file_is_one_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "nodes.csv"
    path.write_bytes(bytes(range(256)) * 40)
    with pytest.raises(TraceFormatError) as exc:
        read_nodes(path, refusals=_log()[0])
    assert exc.value.line == 1 and "\n" not in str(exc.value)
