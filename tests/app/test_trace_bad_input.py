"""`gpufrag replay` and `gpufrag experiment` on bad trace input: one clear line on stderr per
refusal reason, exit status 2, no traceback, and nothing run (no store made).

The absurd GPU count is the case that once ran for minutes while memory grew past several GB;
its deadline is generous for a busy machine, the measured figure is in the README."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.app.pipeline_helpers import dsn_for, gpufrag
from tests.paths import TRACE_DIR

NODE_LIST = TRACE_DIR / "openb_node_list_gpu_node.csv"
POD_LIST = TRACE_DIR / "openb_pod_list_default.csv"


def _head(path: Path, rows: int) -> list[str]:
    with path.open(encoding="utf-8") as f:
        return [next(f).rstrip("\n") for _ in range(rows + 1)]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Small lists cut from the shipped ones (20 nodes, 200 pods), each spoiled one way."""
    d = tmp_path_factory.mktemp("bad")
    nodes, pods = _head(NODE_LIST, 20), _head(POD_LIST, 200)
    made: dict[str, list[str] | bytes] = {
        "nodes": nodes,
        "pods": pods,
        "absurd_gpus": [*nodes, "absurd,96000,393216,1000000000,G2"],
        "absurd_gpus_1e30": [*nodes, f"absurd,96000,393216,{10**30},G2"],
        "negative": [*nodes, "neg,-96000,393216,2,G2"],
        "not_a_number": [*nodes, "nan,abc,393216,2,G2"],
        "duplicate": [*nodes, nodes[1]],
        "two_reasons": [*nodes, "a,1,1,99,G2", "b,1,1,98,G2", "c,-1,1,0,"],
        "missing_column": [line.rsplit(",", 1)[0] for line in nodes],
        "huge_line": [*nodes, "x" * 100_000],
        "empty": b"",
        "binary": bytes(range(128, 256)) * 64,
        "pod_cpu": [*pods, "bad-pod,99999999999,8192,1,500,,LS,Running,10,20,11"],
        "pod_late": [*pods, "late,4000,8192,1,500,,LS,Running,10,99999999999999,11"],
    }
    out = {}
    for name, content in made.items():
        path = d / f"{name}.csv"
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text("\n".join(content) + "\n", encoding="utf-8")
        out[name] = path
    return out


def _one_line(out_stderr: str) -> str:
    assert "Traceback" not in out_stderr
    lines = out_stderr.strip().splitlines()
    assert len(lines) == 1, out_stderr
    assert lines[0].startswith("gpufrag: error: ")
    return lines[0]


def test_absurd_gpu_count_is_refused_at_once(files: dict[str, Path], tmp_path: Path) -> None:
    for case in ("absurd_gpus", "absurd_gpus_1e30"):
        # refused before any seed runs (the line names the row); the 60 s cut fails a hang
        out = gpufrag(
            dsn_for(tmp_path / "unused"),
            *("experiment", "--policy", "fgd", "--seeds", "42-51"),
            *("--nodes", str(files[case]), "--pods", str(files["pods"])),
            timeout=60,
        )
        assert out.returncode == 2, out.stderr
        line = _one_line(out.stderr)
        assert f"{files[case]}:22: column 'gpu': " in line and "outside 0..64" in line
        assert "1 row refused (out_of_range)" in line and "--skip-bad-rows" in line
        assert out.stdout == ""


def test_a_trace_past_the_default_bounds_is_refused_before_it_runs(tmp_path: Path) -> None:
    # the probe's list: 600 KB, 20,000 nodes of 64 GPUs; it ran past 120 s before the bounds
    nodes = tmp_path / "huge.csv"
    rows = (f"n{i},96000,786432,64,G2" for i in range(20_000))
    nodes.write_text("sn,cpu_milli,memory_mib,gpu,model\n" + "\n".join(rows) + "\n")
    fewer = tmp_path / "fewer.csv"  # under the node bound, over the GPU one
    fewer.write_text("\n".join(nodes.read_text().splitlines()[:2001]) + "\n")
    for path, says in (
        (nodes, "more than 10000 rows (GPUFRAG_TRACE__MAX_NODES)"),
        (fewer, "128000 GPUs in all, more than 65536 (GPUFRAG_TRACE__MAX_GPUS)"),
    ):
        out = gpufrag(
            dsn_for(tmp_path / "unused"),
            *("experiment", "--policy", "best-fit", "--seeds", "42", "--nodes", str(path)),
            timeout=60,
        )
        assert out.returncode == 2, out.stderr
        assert _one_line(out.stderr) == f"gpufrag: error: {path}: {says}"


NODE_CASES = [
    ("negative", "1 row refused (negative), first at {f}:22: column 'cpu_milli': negative"),
    ("not_a_number", "(not_a_number), first at {f}:22: column 'cpu_milli': not a non-negative"),
    ("duplicate", "(duplicate_name), first at {f}:22: column 'sn': duplicate name"),
    ("missing_column", "{f}:1: column 'model': missing required column"),
    ("huge_line", "(line_too_long), first at {f}:22: line longer than 65536 bytes"),
    ("empty", "{f}:1: empty file; expected header"),
    ("binary", "{f}:1: not valid UTF-8"),
]


@pytest.mark.parametrize(("case", "expected"), NODE_CASES, ids=[c[0] for c in NODE_CASES])
def test_bad_node_list_is_one_line(
    files: dict[str, Path], tmp_path: Path, case: str, expected: str
) -> None:
    store = tmp_path / "store"
    out = gpufrag(
        dsn_for(store),
        *("replay", "--nodes", str(files[case]), "--pods", str(files["pods"])),
        timeout=60,
    )
    assert out.returncode == 2, out.stderr
    assert expected.format(f=files[case]) in _one_line(out.stderr)
    assert not store.exists()  # refused before the run: no store, no run row


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("pod_cpu", "{f}:202: column 'cpu_milli': 99999999999 outside 0..4096000"),
        ("pod_late", "{f}:202: column 'deletion_time': 99999999999999 outside 0..7526390400"),
    ],
)
def test_timeline_replay_with_a_bad_pod_is_one_line(
    files: dict[str, Path], tmp_path: Path, case: str, expected: str
) -> None:
    store = tmp_path / "store"
    out = gpufrag(
        dsn_for(store),
        *("replay", "--mode", "timeline"),
        *("--nodes", str(files["nodes"]), "--pods", str(files[case])),
        timeout=60,
    )
    assert out.returncode == 2, out.stderr
    assert expected.format(f=files[case]) in _one_line(out.stderr)
    assert not store.exists()


def test_one_line_per_reason_with_counts(files: dict[str, Path], tmp_path: Path) -> None:
    out = gpufrag(
        dsn_for(tmp_path / "store"),
        *("experiment", "--policy", "fgd", "--nodes", str(files["two_reasons"])),
        *("--pods", str(files["pods"])),
        timeout=60,
    )
    assert out.returncode == 2 and "Traceback" not in out.stderr
    f = files["two_reasons"]
    assert out.stderr.splitlines() == [
        f"gpufrag: error: 2 rows refused (out_of_range), first at {f}:22: column 'gpu': "
        "99 outside 0..64",
        f"gpufrag: error: 1 row refused (negative), first at {f}:24: column 'cpu_milli': "
        "negative number -1; nothing was run (--skip-bad-rows runs without them)",
    ]


@pytest.mark.parametrize(
    ("args", "env", "expected"),
    [
        (
            ("--mode", "timeline", "--time-scale", "1e-300"),
            {},
            "--time-scale 1e-300 puts the trace's last time (",
        ),
        ((), {"GPUFRAG_TRACE__MAX_FILE_BYTES": "10000"}, "over the 10000-byte limit"),
        ((), {"GPUFRAG_TRACE__START": "2300-01-01T00:00:00Z"}, "GPUFRAG_TRACE__START: "),
        ((), {"GPUFRAG_TRACE__MAX_NODES": "10"}, "more than 10 rows (GPUFRAG_TRACE__MAX_NODES)"),
        ((), {"GPUFRAG_TRACE__MAX_PODS": "100"}, "more than 100 rows (GPUFRAG_TRACE__MAX_PODS)"),
        (
            (),
            {"GPUFRAG_TRACE__MAX_GPUS": "10"},
            "GPUs in all, more than 10 (GPUFRAG_TRACE__MAX_GPUS)",
        ),
        (("--ratio", "1e9"), {}, "Invalid value for --ratio: 1e+09 is above 10"),
        (("--ratio", "nan"), {}, "--ratio"),
        (("--seed", str(2**64)), {}, "Invalid value for '--seed'"),
    ],
    ids=[
        "stretched-times",
        "file-cap",
        "bad-start",
        "node-count",
        "pod-count",
        "gpu-total",
        "huge-ratio",
        "nan-ratio",
        "huge-seed",
    ],
)
def test_bad_options_and_settings_are_one_line(
    files: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    args: tuple[str, ...],
    env: dict[str, str],
    expected: str,
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    store = tmp_path / "store"
    out = gpufrag(
        dsn_for(store),
        *("replay", "--nodes", str(files["nodes"]), "--pods", str(files["pods"]), *args),
        timeout=60,
    )
    assert out.returncode == 2, out.stderr
    assert expected in _one_line(out.stderr)
    assert not store.exists()
