"""Tests for the Alibaba cluster-trace-gpu-v2023 reader: real files, then every way to break one."""

from __future__ import annotations

import csv
import hashlib
import pickle
import re
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connectors.trace import (
    TraceFormatError,
    TraceNode,
    TracePod,
    bundled_nodes_path,
    bundled_pods_path,
    read_nodes,
    read_pods,
)
from connectors.trace.alibaba_csv import (
    NODE_COLUMNS,
    POD_COLUMNS_FULL,
    POD_COLUMNS_SHORT,
    trace_seconds_max,
)
from models.bounds import CPU_MILLI_MAX, MEMORY_MIB_MAX
from models.settings import TraceSettings

FULL_HEADER = ",".join(POD_COLUMNS_FULL)
SHORT_HEADER = ",".join(POD_COLUMNS_SHORT)
NODE_HEADER = ",".join(NODE_COLUMNS)
GOOD_POD = "pod-a,4000,8192,1,500,,LS,Running,10,20,11"
GOOD_NODE = "node-a,96000,393216,8,G2"

# ---------------------------------------------------------------------------- real trace files


def test_gpu_node_list(trace_dir: Path) -> None:
    nodes = read_nodes(trace_dir / "openb_node_list_gpu_node.csv")
    assert len(nodes) == 1213
    assert sum(n.gpu_count for n in nodes) == 6212
    assert all(n.gpu_count > 0 and n.gpu_model is not None for n in nodes)
    assert nodes[0] == TraceNode("openb-node-0000", 64000, 262144, 2, "P100")
    assert Counter(n.gpu_model for n in nodes)["G2"] == 549


def test_all_node_list(trace_dir: Path) -> None:
    nodes = read_nodes(trace_dir / "openb_node_list_all_node.csv")
    assert len(nodes) == 1523
    cpu_only = [n for n in nodes if n.gpu_count == 0]
    assert len(cpu_only) == 310
    assert all(n.gpu_model is None for n in cpu_only)
    assert sum(n.gpu_count for n in nodes) == 6212


@pytest.mark.parametrize(
    ("file", "count", "full"),
    [
        ("openb_pod_list_default.csv", 8152, True),
        ("openb_pod_list_cpu050.csv", 7439, True),
        ("openb_pod_list_gpushare40.csv", 8152, True),
        ("openb_pod_list_multigpu20.csv", 8324, False),
    ],
)
def test_pod_lists(trace_dir: Path, file: str, count: int, full: bool) -> None:
    path = trace_dir / file
    pods = read_pods(path)
    assert len(pods) == count
    assert len({p.name for p in pods}) == count
    with path.open(newline="") as f:
        raw = list(csv.DictReader(f))
    for pod, row in zip(pods, raw, strict=True):
        assert pod.name == row["name"]
        assert pod.total_gpu_milli == int(row["num_gpu"]) * int(row["gpu_milli"])
    if full:
        assert all(p.qos is not None and p.phase is not None for p in pods)
        assert all(p.creation_time is not None for p in pods)
    else:
        assert all(p.qos is None and p.phase is None and p.creation_time is None for p in pods)
        assert all(p.deletion_time is None and p.scheduled_time is None for p in pods)


def test_default_pod_list_details(trace_dir: Path) -> None:
    pods = read_pods(trace_dir / "openb_pod_list_default.csv")
    assert pods[1] == TracePod(
        "openb-pod-0001", 6000, 12288, 1, 460, (), "LS", "Running", 427061, 12902960, 427061
    )
    assert pods[1].shape == (6000, 460, 1, "")
    assert Counter(p.num_gpu for p in pods) == {1: 6989, 0: 1088, 8: 44, 2: 16, 4: 15}
    # Pending pods were never scheduled: the blank scheduled_time must survive as None.
    unscheduled = [p for p in pods if p.scheduled_time is None]
    assert len(unscheduled) == 897
    assert {p.phase for p in unscheduled} <= {"Pending", "Failed"}
    assert Counter(p.qos for p in pods) == {
        "LS": 4647,
        "BE": 3398,
        "Burstable": 100,
        "Guaranteed": 7,
    }


def listed_sha256(readme: Path) -> dict[str, str]:
    """The ``| `file` | ... | `sha256` |`` rows of a data folder's README."""
    rows = re.findall(r"^\| `([^`]+\.csv)` \|.*\| `([0-9a-f]{64})` \|$", readme.read_text(), re.M)
    return dict(rows)


@pytest.mark.parametrize("folder", [".", "fgd-expected"])
def test_shipped_copies_match_the_upstream_hashes(trace_dir: Path, folder: str) -> None:
    """Every CSV shipped is listed in the README beside it, unchanged since it was copied."""
    data = trace_dir / folder
    listed = listed_sha256(data / "README.md")
    assert sorted(listed) == sorted(p.name for p in data.glob("*.csv"))
    for name, digest in listed.items():
        assert hashlib.sha256((data / name).read_bytes()).hexdigest() == digest, name


def test_bundled_files_read() -> None:
    assert len(read_nodes(bundled_nodes_path())) == 1213
    assert len(read_pods(bundled_pods_path())) == 8152
    assert (bundled_pods_path().parent / "README.md").is_file()


# ---------------------------------------------------------------------------- shapes and errors


def test_shape_joins_gpu_spec() -> None:
    pod = TracePod("p", 8000, 1, 2, 1000, ("V100M16", "V100M32"), None, None, None, None, None)
    assert pod.shape == (8000, 1000, 2, "V100M16|V100M32")
    assert pod.total_gpu_milli == 2000


def test_error_message_format_and_pickle() -> None:
    err = TraceFormatError("openb_pod_list_default.csv", 17, "cpu_milli", "negative number -5")
    assert str(err) == "openb_pod_list_default.csv:17: column 'cpu_milli': negative number -5"
    assert isinstance(err, ValueError)
    back = pickle.loads(pickle.dumps(err))
    assert (back.file, back.line, back.column, back.reason) == (
        err.file,
        err.line,
        err.column,
        err.reason,
    )
    assert str(TraceFormatError("x.csv", 3, None, "blank line")) == "x.csv:3: blank line"


def _write(tmp_path: Path, name: str, *lines: str) -> Path:
    path = tmp_path / name
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def _assert_error(
    exc: pytest.ExceptionInfo[TraceFormatError],
    path: Path,
    line: int,
    column: str | None,
    reason: str,
) -> None:
    err = exc.value
    message = str(err)
    assert path.name in message
    assert f":{line}:" in message
    assert err.file == str(path)
    assert err.line == line
    assert err.column == column
    if column is not None:
        assert f"column {column!r}" in message
    assert reason in err.reason, message


def _pod_row(**cells: str) -> str:
    """GOOD_POD renamed to pod-b, with some cells replaced by bad values."""
    row = dict(zip(POD_COLUMNS_FULL, GOOD_POD.split(","), strict=True)) | {"name": "pod-b"}
    return ",".join((row | cells).values())


POD_CASES = [
    # bad row (always line 3), column, reason fragment
    pytest.param(_pod_row(cpu_milli="1.5"), "cpu_milli", "integer: '1.5'", id="non-integer"),
    pytest.param(_pod_row(cpu_milli="1e3"), "cpu_milli", "integer: '1e3'", id="exponent"),
    pytest.param(_pod_row(cpu_milli=" 4000"), "cpu_milli", "integer: ' 4000'", id="padded"),
    pytest.param(_pod_row(memory_mib="+8192"), "memory_mib", "integer: '+8192'", id="plus"),
    pytest.param(_pod_row(num_gpu="\u00b2"), "num_gpu", "not a non-negative integer", id="sup2"),
    pytest.param(_pod_row(cpu_milli="-5"), "cpu_milli", "negative number -5", id="negative"),
    pytest.param(_pod_row(memory_mib=""), "memory_mib", "missing number", id="blank-number"),
    pytest.param(_pod_row(creation_time=""), "creation_time", "missing number", id="blank-time"),
    pytest.param(_pod_row(name=""), "name", "missing name", id="blank-name"),
    pytest.param(
        _pod_row().rsplit(",", 1)[0],
        "scheduled_time",
        "expected 11 fields, got 10",
        id="too-few-fields",
    ),
    pytest.param(_pod_row(gpu_milli="1500"), "gpu_milli", "1500 outside 0..1000", id="milli>1000"),
    pytest.param(
        _pod_row(num_gpu="0", gpu_milli="300"), "gpu_milli", "with num_gpu 0", id="cpu-pod-milli"
    ),
    pytest.param(_pod_row(gpu_milli="0"), "gpu_milli", "0 with num_gpu 1", id="gpu-pod-no-milli"),
    pytest.param(
        _pod_row(num_gpu="2", gpu_milli="500"), "gpu_milli", "500 with num_gpu 2", id="multi-shared"
    ),
    pytest.param(
        _pod_row(gpu_spec="T4|X 999"), "gpu_spec", "not a GPU model name: 'X 999'", id="bad-model"
    ),
    pytest.param(_pod_row(gpu_spec="T4|"), "gpu_spec", "empty GPU model", id="empty-spec-part"),
    pytest.param(
        _pod_row(name="pod-a"), "name", "duplicate name 'pod-a' (first on line 2)", id="dup-name"
    ),
    pytest.param(
        _pod_row(creation_time="30", deletion_time="20", scheduled_time="30"),
        "deletion_time",
        "20 is before creation_time 30",
        id="deletion-before-creation",
    ),
]


@pytest.mark.parametrize(("bad", "column", "reason"), POD_CASES)
def test_bad_pod_row(tmp_path: Path, bad: str, column: str, reason: str) -> None:
    path = _write(tmp_path, "openb_pod_list_bad.csv", FULL_HEADER, GOOD_POD, bad)
    with pytest.raises(TraceFormatError) as exc:
        read_pods(path)
    _assert_error(exc, path, 3, column, reason)


def test_bad_short_layout_row(tmp_path: Path) -> None:
    good = ",".join(GOOD_POD.split(",")[:5])
    path = _write(tmp_path, "openb_pod_list_short.csv", SHORT_HEADER, good, "pod-b,1,1,1,1.0")
    with pytest.raises(TraceFormatError) as exc:
        read_pods(path)
    _assert_error(exc, path, 3, "gpu_milli", "integer: '1.0'")


NODE_CASES = [
    ("non-integer", "node-b,96000,393216,2.0,T4", "gpu", "not a non-negative integer: '2.0'"),
    ("negative", "node-b,96000,-1,2,T4", "memory_mib", "negative number -1"),
    ("blank-number", "node-b,,393216,2,T4", "cpu_milli", "missing number"),
    ("too-few-fields", "node-b,96000,393216,2", "model", "expected 5 fields, got 4"),
    ("bad-model", "node-b,96000,393216,2,X 999", "model", "not a GPU model name: 'X 999'"),
    ("gpu-without-model", "node-b,96000,393216,2,", "model", "missing GPU model"),
    ("model-without-gpu", "node-b,96000,393216,0,T4", "model", "given for a node with 0 GPUs"),
    ("duplicate-name", "node-a,96000,393216,2,T4", "sn", "duplicate name 'node-a'"),
]


@pytest.mark.parametrize(
    ("bad", "column", "reason"),
    [case[1:] for case in NODE_CASES],
    ids=[case[0] for case in NODE_CASES],
)
def test_bad_node_row(tmp_path: Path, bad: str, column: str, reason: str) -> None:
    path = _write(tmp_path, "openb_node_list_bad.csv", NODE_HEADER, GOOD_NODE, bad)
    with pytest.raises(TraceFormatError) as exc:
        read_nodes(path)
    _assert_error(exc, path, 3, column, reason)


HEADER_CASES = [
    ("unknown-column", f"{FULL_HEADER},color", "color", "unknown column"),
    ("renamed-column", SHORT_HEADER.replace("num_gpu", "gpus"), "gpus", "unknown column"),
    (
        "padded-column",
        SHORT_HEADER.replace(",cpu_milli", ", cpu_milli"),
        " cpu_milli",
        "unknown column",
    ),
    (
        "missing-required",
        "name,cpu_milli,memory_mib,num_gpu",
        "gpu_milli",
        "missing required column",
    ),
    ("half-full-layout", f"{SHORT_HEADER},gpu_spec,qos", "pod_phase", "full pod layout"),
    ("duplicate-column", f"{SHORT_HEADER},cpu_milli", "cpu_milli", "duplicate column"),
]


@pytest.mark.parametrize(
    ("header", "column", "reason"),
    [case[1:] for case in HEADER_CASES],
    ids=[case[0] for case in HEADER_CASES],
)
def test_bad_pod_header(tmp_path: Path, header: str, column: str, reason: str) -> None:
    path = _write(tmp_path, "openb_pod_list_hdr.csv", header, GOOD_POD)
    with pytest.raises(TraceFormatError) as exc:
        read_pods(path)
    _assert_error(exc, path, 1, column, reason)


def test_node_reader_rejects_pod_file(tmp_path: Path) -> None:
    path = _write(tmp_path, "pods_as_nodes.csv", FULL_HEADER, GOOD_POD)
    with pytest.raises(TraceFormatError) as exc:
        read_nodes(path)
    _assert_error(exc, path, 1, "name", "unknown column")


def test_too_many_fields(tmp_path: Path) -> None:
    path = _write(tmp_path, "extra.csv", NODE_HEADER, GOOD_NODE, "node-b,1,1,0,,surplus")
    with pytest.raises(TraceFormatError) as exc:
        read_nodes(path)
    _assert_error(exc, path, 3, None, "expected 5 fields, got 6")


def test_blank_line_is_an_error(tmp_path: Path) -> None:
    path = _write(tmp_path, "gap.csv", NODE_HEADER, GOOD_NODE, "", "node-b,1,1,0,")
    with pytest.raises(TraceFormatError) as exc:
        read_nodes(path)
    _assert_error(exc, path, 3, None, "blank line")


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.csv"
    path.write_bytes(b"")
    with pytest.raises(TraceFormatError) as exc:
        read_pods(path)
    _assert_error(exc, path, 1, None, "empty file")


def test_invalid_utf8_reports_its_line(tmp_path: Path) -> None:
    path = tmp_path / "latin1.csv"
    path.write_bytes(f"{NODE_HEADER}\n{GOOD_NODE}\nn\xe9ud,1,1,0,\n".encode("latin-1"))
    with pytest.raises(TraceFormatError) as exc:
        read_nodes(path)
    _assert_error(exc, path, 3, None, "not valid UTF-8")


def test_malformed_quoting(tmp_path: Path) -> None:
    path = _write(tmp_path, "quotes.csv", NODE_HEADER, GOOD_NODE, '"node-b"x,1,1,0,')
    with pytest.raises(TraceFormatError) as exc:
        read_nodes(path)
    _assert_error(exc, path, 3, None, "malformed CSV")


def test_header_only_and_crlf(tmp_path: Path) -> None:
    assert read_pods(_write(tmp_path, "none.csv", SHORT_HEADER)) == []
    path = tmp_path / "crlf.csv"
    path.write_bytes(f"\ufeff{NODE_HEADER}\r\n{GOOD_NODE}\r\n".encode())
    assert read_nodes(path) == [TraceNode("node-a", 96000, 393216, 8, "G2")]


def test_optional_times_and_spec(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "spec.csv",
        FULL_HEADER,
        "pod-a,16000,32768,1,1000,V100M16|V100M32,LS,Pending,10,,",
        "pod-b,4000,8192,0,0,,BE,Running,5,5,5",
    )
    a, b = read_pods(path)
    assert a.gpu_spec == ("V100M16", "V100M32")
    assert (a.deletion_time, a.scheduled_time) == (None, None)
    assert a.shape == (16000, 1000, 1, "V100M16|V100M32")
    assert b.total_gpu_milli == 0
    assert b.deletion_time == b.creation_time == 5


# ---------------------------------------------------------------------------- round trip

_SECONDS_MAX = trace_seconds_max(TraceSettings())
_cpu = st.integers(min_value=0, max_value=CPU_MILLI_MAX)
_memory = st.integers(min_value=0, max_value=MEMORY_MIB_MAX)
_counts = st.integers(min_value=0, max_value=_SECONDS_MAX)
_gpu_demand = st.one_of(
    st.just((0, 0)),
    st.tuples(st.just(1), st.integers(min_value=1, max_value=1000)),
    st.tuples(st.sampled_from([2, 4, 8]), st.just(1000)),
)


@st.composite
def _pods(draw: st.DrawFn) -> list[TracePod]:
    n = draw(st.integers(min_value=0, max_value=20))
    pods = []
    for i in range(n):
        num_gpu, gpu_milli = draw(_gpu_demand)
        created = draw(_counts)
        deleted = draw(st.one_of(st.none(), st.integers(min_value=created, max_value=_SECONDS_MAX)))
        spec = draw(st.lists(st.sampled_from(["T4", "P100", "V100M16", "A10"]), max_size=3))
        pods.append(
            TracePod(
                f"pod-{i}",
                draw(_cpu),
                draw(_memory),
                num_gpu,
                gpu_milli,
                tuple(spec),
                draw(st.sampled_from(["LS", "BE", "Burstable", "Guaranteed"])),
                draw(st.sampled_from(["Running", "Pending", "Failed", "Succeeded"])),
                created,
                deleted,
                draw(st.one_of(st.none(), _counts)),
            )
        )
    return pods


def _cell(value: int | None) -> str:
    return "" if value is None else str(value)


@settings(max_examples=50, deadline=None)
@given(pods=_pods())
def test_round_trip(tmp_path_factory: pytest.TempPathFactory, pods: list[TracePod]) -> None:
    lines = [FULL_HEADER]
    for p in pods:
        fields = [p.name, str(p.cpu_milli), str(p.memory_mib), str(p.num_gpu), str(p.gpu_milli)]
        fields += ["|".join(p.gpu_spec), p.qos or "", p.phase or ""]
        fields += [_cell(p.creation_time), _cell(p.deletion_time), _cell(p.scheduled_time)]
        lines.append(",".join(fields))
    path = _write(tmp_path_factory.mktemp("rt"), "rt.csv", *lines)
    assert read_pods(path) == pods


def test_unterminated_quote_points_at_record_start(tmp_path: Path) -> None:
    path = _write(tmp_path, "open_quote.csv", NODE_HEADER, GOOD_NODE, '"node-b,1,1,0,', "x,1,1,0,")
    with pytest.raises(TraceFormatError) as exc:
        read_nodes(path)
    _assert_error(exc, path, 3, None, "malformed CSV")


def test_line_numbers_after_multiline_record(tmp_path: Path) -> None:
    path = _write(tmp_path, "multi.csv", NODE_HEADER, '"node\nb",1,1,0,', "node-c,1,x,0,")
    with pytest.raises(TraceFormatError) as exc:
        read_nodes(path)
    _assert_error(exc, path, 4, "memory_mib", "not a non-negative integer: 'x'")
