"""`gpufrag dcgm-parse` run as a user runs it: a subprocess on saved exporter pages."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from models import GpuSample, from_json

FIXTURES = Path(__file__).resolve().parents[1] / "connectors" / "dcgm" / "fixtures"


def gpufrag(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "streams.app", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_prints_samples_and_reports_refused_lines() -> None:
    out = gpufrag("dcgm-parse", str(FIXTURES / "malformed_h200.txt"))
    assert out.returncode == 1, out.stderr  # refused lines: 1, the rest still printed
    samples = [from_json(GpuSample, line) for line in out.stdout.splitlines()]
    assert [(s.node, s.gpu_index) for s in samples] == [("gpu-h200-07", 0), ("gpu-h200-07", 1)]
    assert samples[0].memory_total_mib == 143772.0
    err = out.stderr.splitlines()
    assert err[0] == "6 lines refused (1 labels, 4 syntax, 1 value):"
    assert err[-1].startswith("gpufrag: error: 6 lines of ")
    assert err[-1].endswith(" refused; 2 samples printed")
    assert [e.split(":")[0].strip() for e in err[1:-1]] == [
        "line 4",
        "line 8",
        "line 9",
        "line 13",
        "line 14",
        "line 22",
    ]
    assert "DCGM_FI_DEV_GPU_UTIL: 250 % is over 100" in err[2]


def test_node_option_names_a_page_without_hostname() -> None:
    out = gpufrag("dcgm-parse", str(FIXTURES / "legacy_old_namespace.txt"), "--node", "t4-a")
    assert out.returncode == 0, out.stderr
    samples = [from_json(GpuSample, line) for line in out.stdout.splitlines()]
    assert {s.node for s in samples} == {"t4-a"}
    assert samples[0].pod == "resnet-serve-6b8d9-x2x7q"
    assert out.stderr == ""


def test_blanks_are_reported_as_kept_unknown() -> None:
    out = gpufrag("dcgm-parse", str(FIXTURES / "blanks_a100.txt"))
    assert out.returncode == 0, out.stderr
    assert "7 values DCGM reported as blank or not supported" in out.stderr
    assert '"memory_used_mib":null' in out.stdout.splitlines()[0]


def test_nothing_parsed_is_an_error() -> None:
    out = gpufrag("dcgm-parse", str(FIXTURES / "legacy_old_namespace.txt"))
    assert out.returncode == 1
    assert out.stdout == ""
    assert out.stderr.splitlines()[-1].startswith("gpufrag: error: no GPU samples in ")


def test_missing_or_unreadable_file_is_one_line_and_nonzero(tmp_path: Path) -> None:
    missing = gpufrag("dcgm-parse", str(tmp_path / "nope.txt"))
    assert missing.returncode == 2
    assert missing.stderr == f"gpufrag: error: file not found: {tmp_path / 'nope.txt'}\n"
    folder = gpufrag("dcgm-parse", str(tmp_path))
    assert folder.returncode == 2
    assert folder.stderr.count("\n") == 1 and "is a directory" in folder.stderr
