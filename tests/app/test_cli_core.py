"""The planner commands, run as a user runs them: a subprocess with real files."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


def gpufrag(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "streams.app", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def main_then_print(argv: list[str], expression: str) -> subprocess.CompletedProcess[str]:
    """``gpufrag ARGV`` in a fresh interpreter, then ``print(EXPRESSION)`` however it ended:
    what a run left in the process (the modules it imported) seen from inside it."""
    probe = (
        "import sys\n"
        f"sys.argv = ['gpufrag', *{argv!r}]\n"
        "from streams.app.cli import main\n"
        "try:\n"
        "    main()\n"
        "finally:\n"
        f"    print({expression})\n"
    )
    return subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120
    )


def test_frag_json_on_bundled_trace() -> None:
    out = gpufrag("frag", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert set(data) >= {"frag_amount_pct", "frag_ratio_pct", "typical_pods"}
    assert data["frag_amount_pct"] == data["frag_ratio_pct"]  # empty cluster: idle == all
    assert data["typical_pods"] == 35
    assert data["gpus"] == 6212


def test_experiment_json_has_equal_length_lists(trace_dir: Path) -> None:
    out = gpufrag(
        "experiment",
        "--pods",
        str(trace_dir / "openb_pod_list_multigpu20.csv"),
        "--policy",
        "best-fit",
        "--seeds",
        "7",
        "--json",
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    lengths = {
        len(data[k]) for k in ("arrived_pct", "alloc_pct", "frag_amount_pct", "frag_ratio_pct")
    }
    assert lengths == {131}
    assert data["alloc_pct"][130] > data["alloc_pct"][50] > 0


def test_experiment_prints_published_beside_ours(published_dir: Path) -> None:
    out = gpufrag(
        "experiment",
        "--policy",
        "fgd",
        "--seeds",
        "42",
        "--published",
        str(published_dir),
        "--every",
        "50",
    )
    assert out.returncode == 0, out.stderr
    assert "published" in out.stdout and "diff" in out.stdout
    rows = [ln.split() for ln in out.stdout.splitlines() if ln.strip()[:1].isdigit()]
    assert [r[0] for r in rows] == ["0", "50", "100", "130"]
    assert all(len(r) == 10 for r in rows)  # level + 3 x (ours, published, diff)


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (
            "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1000,10,1,1.5\n",
            "bad.csv:2: column 'gpu_milli'",
        ),
        (
            "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,-5,10,0,0\n",
            "bad.csv:2: column 'cpu_milli'",
        ),
        (
            "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1000,,0,0\n",
            "bad.csv:2: column 'memory_mib'",
        ),
        (
            "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
            "deletion_time,scheduled_time\np0,1000,10,1,1000,X 999,LS,Running,0,5,0\n",
            "bad.csv:2: column 'gpu_spec'",
        ),
    ],
)
def test_bad_pod_csv_gives_one_line_naming_file_line_column(
    tmp_path: Path, content: str, needle: str
) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text(content)
    out = gpufrag("frag", "--pods", str(bad))
    assert out.returncode == 2
    assert needle in out.stderr
    assert "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_missing_file_and_unknown_policy_are_clear(tmp_path: Path) -> None:
    out = gpufrag("frag", "--pods", str(tmp_path / "nope.csv"))
    assert out.returncode == 2 and "file not found" in out.stderr
    assert "Traceback" not in out.stderr
    out = gpufrag("experiment", "--policy", "tetris", "--seeds", "1")
    assert out.returncode == 2 and "unknown policy 'tetris'" in out.stderr
    out = gpufrag("experiment", "--policy", "fgd", "--seeds", "5-1")
    assert out.returncode == 2 and "ends before it starts" in out.stderr


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--seeds", "-3"], "is not a seed list"),
        (["--seeds", "1,,2"], "is not a seed list"),
        (["--seeds", "0-100000"], "at most 1000 seeds"),
        (["--ratio", "0"], "ratio must be a finite number above 0"),
        (["--ratio", "inf"], "ratio must be a finite number above 0"),
        (["--every", "0"], "--every"),
    ],
)
def test_experiment_usage_errors_are_one_line(args: list[str], needle: str) -> None:
    out = gpufrag("experiment", "--policy", "fgd", *args)
    assert out.returncode == 2
    assert needle in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr


def test_workloads_the_protocol_cannot_measure_are_refused(tmp_path: Path) -> None:
    cpu_only = tmp_path / "cpu.csv"
    cpu_only.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np1,1000,100,0,0\n")
    no_gpu_nodes = tmp_path / "nodes.csv"
    no_gpu_nodes.write_text("sn,cpu_milli,memory_mib,gpu,model\nn1,1000,1000,0,\n")
    empty = tmp_path / "empty.csv"
    empty.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli\n")
    cases = [
        (
            ["experiment", "--policy", "fgd", "--seeds", "1", "--pods", str(cpu_only)],
            "no pod in the pod list requests a GPU",
        ),
        (
            ["experiment", "--policy", "fgd", "--seeds", "1", "--nodes", str(no_gpu_nodes)],
            "the node list has no GPUs",
        ),
        (["frag", "--nodes", str(no_gpu_nodes)], "the node list has no GPUs"),
        (["frag", "--pods", str(empty)], "the pod list is empty"),
    ]
    for args, needle in cases:
        out = gpufrag(*args)
        assert out.returncode == 2, args
        assert needle in out.stderr and "Traceback" not in out.stderr


def test_published_comparison_refuses_unpublished_seeds_and_ratios(published_dir: Path) -> None:
    for extra in (["--seeds", "42,1000"], ["--seeds", "42", "--ratio", "0.8"]):
        out = gpufrag("experiment", "--policy", "fgd", "--published", str(published_dir), *extra)
        assert out.returncode == 2
        assert "no published row" in out.stderr


def test_a_bad_setting_is_one_line_per_problem_naming_the_variable(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "GPUFRAG_ANALYSIS__EVALUATE_EVERY_S": "10",  # moved to the detectors' groups
        "GPUFRAG_DETECTORS__FRAGMENTATION__RATIO_OPEN_PCT": "200",
    }
    out = subprocess.run(
        [sys.executable, "-m", "streams.app", "replay", "--store", f"chdb://{tmp_path}/st"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=env,
    )
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert lines == [
        "gpufrag: error: unknown setting GPUFRAG_ANALYSIS__EVALUATE_EVERY_S; did you mean "
        "GPUFRAG_DETECTORS__UNPLACEABLE_PENDING__EVALUATE_EVERY_S?",
        "gpufrag: error: setting GPUFRAG_DETECTORS__FRAGMENTATION__RATIO_OPEN_PCT: "
        "Input should be less than or equal to 100",
    ]


@pytest.mark.parametrize(
    "command",
    [
        ["sql", "pending_with_free_capacity"],
        ["explain", "openb-pod-1"],
        ["report", "--out", "REPORT"],
    ],
)
def test_read_commands_refuse_a_store_that_does_not_exist_and_create_none(
    tmp_path: Path, command: list[str]
) -> None:
    missing = tmp_path / "mistyped" / "store"
    args = [a.replace("REPORT", str(tmp_path / "r.html")) for a in command]
    out = gpufrag(*args, "--store", f"chdb://{missing}")
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        f"gpufrag: error: no store at {missing}: nothing was ever written there (check "
        "--store or GPUFRAG_STORE__DSN; `gpufrag replay` or `gpufrag watch` make one)"
    ]
    assert not (tmp_path / "mistyped").exists()


def test_a_command_loads_only_its_own_libraries(tmp_path: Path) -> None:
    # `experiment` refusing a bad trace should not first load Kafka, chDB and gRPC for the
    # other commands (they made its start-up twice as long)
    nodes = tmp_path / "nodes.csv"
    nodes.write_text("sn,cpu_milli,memory_mib,gpu,model\nn1,64000,262144,1000000000,V100M16\n")
    done = main_then_print(
        ["experiment", "--policy", "fgd", "--nodes", str(nodes)],
        "sorted(m for m in ('aiokafka', 'chdb', 'clickhouse_connect', 'grpc', 'faust') "
        "if m in sys.modules)",
    )
    assert done.returncode == 2, done.stderr
    assert "column 'gpu': 1000000000 outside 0..64" in done.stderr
    assert done.stdout.strip() == "[]"


def test_version_prints_the_installed_version_and_loads_no_command() -> None:
    done = main_then_print(
        ["--version"], "sorted(m for m in sys.modules if m.startswith('streams.app.commands.'))"
    )
    assert done.returncode == 0, done.stderr
    version = importlib.metadata.version("gpufrag")
    assert done.stdout.splitlines() == [f"gpufrag {version}", "[]"]
    assert gpufrag("frag", "--version").returncode == 2  # a command has no --version of its own


@pytest.mark.parametrize("argv", [["--help"], [], ["no-such-command"]])
def test_the_command_list_loads_no_command(argv: list[str]) -> None:
    """`gpufrag --help` (and a bare or misspelt `gpufrag`) lists every command from the
    table in ``streams.app.cli`` without importing one: loading all of them was 2.0 s."""
    done = main_then_print(
        argv,
        "sorted(m for m in sys.modules if m.startswith('streams.app.commands.') "
        "or m in ('aiokafka', 'chdb', 'faust', 'kubernetes_asyncio', 'numpy', 'grpc'))",
    )
    *listing, loaded = done.stdout.splitlines() or [""]
    assert loaded == "[]", done.stdout
    if argv == ["no-such-command"]:
        assert done.returncode == 2 and "No such command 'no-such-command'" in done.stderr
        return
    assert done.returncode == 0, done.stderr
    from streams.app.cli import COMMANDS

    listed = [line.split()[0] for line in listing if line.startswith("  ") and line.split()]
    assert [c for c in listed if c in COMMANDS] == list(COMMANDS)


def test_sql_list_lists_every_named_query_without_the_store_side() -> None:
    """`gpufrag sql --list` reads the SQL folder only: the client library, chDB and the
    models took 0.35 s of its 0.6-0.8 s start when the command imported them up front."""
    done = main_then_print(
        ["sql", "--list"],
        "sorted(m for m in ('chdb', 'clickhouse_connect', 'connectors.clickhouse.store', "
        "'models.settings') if m in sys.modules)",
    )
    assert done.returncode == 0, done.stderr
    *listing, loaded = done.stdout.splitlines()
    assert loaded == "[]", done.stdout
    from streams.app.commands.sql import queries_dir
    from streams.app.queries.named_queries import load_queries

    named = list(load_queries(queries_dir()))
    assert named and [line.split()[0] for line in listing if not line.startswith(" ")] == named


def test_the_command_list_is_the_same_with_every_command_loaded() -> None:
    """The listed-only commands stand in for the real ones: the list must not change when
    they are loaded (a summary is one line, so none is cut with '...' either)."""
    from typer.testing import CliRunner

    from streams.app.cli import COMMANDS, build_app

    runner = CliRunner()
    listed = runner.invoke(build_app([]), ["--help"], terminal_width=100)
    loaded = runner.invoke(build_app(list(COMMANDS)), ["--help"], terminal_width=100)
    assert listed.exit_code == loaded.exit_code == 0
    assert listed.output == loaded.output
    for name, (_, summary) in COMMANDS.items():
        assert len(summary) <= 60, name  # one line in an 80-column terminal
        assert f"  {name} " in listed.output and f" {summary}\n" in listed.output
