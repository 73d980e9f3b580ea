"""`gpufrag dcgm-parse` on inputs no exporter writes: one clear line per refused line (or one
line for an input it cannot read), the status saying which, never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

from models import GpuSample, from_json

FIXTURES = Path(__file__).resolve().parents[1] / "connectors" / "dcgm" / "fixtures"
BIG = 2**70
HOST = 'UUID="GPU-x",modelName="NVIDIA H200",Hostname="n1"'


def gpufrag(*args: str, env: Mapping[str, str] = {}) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(
        [sys.executable, "-m", "streams.app", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, **env},
    )
    assert "Traceback" not in out.stderr, out.stderr
    return out


def line(name: str, value: str, labels: str = 'gpu="0"', at: str = "") -> str:
    return f"{name}{{{labels},{HOST}}} {value}{' ' + at if at else ''}\n"


GOOD = line("DCGM_FI_DEV_FB_USED", "1024", 'gpu="1"') + line("DCGM_FI_DEV_GPU_UTIL", "9", 'gpu="1"')
BAD_PAGES = {
    "huge labels": (
        line("DCGM_FI_DEV_FB_USED", "1", f'gpu="{BIG}"')
        + line("DCGM_FI_DEV_FB_USED", "1", f'gpu="0",GPU_I_ID="{BIG}"')
        + GOOD,
        [
            "line 1: DCGM_FI_DEV_FB_USED: gpu_index: gpu label has 22 digits, past 64 bits",
            "line 2: DCGM_FI_DEV_FB_USED: mig_instance: GPU_I_ID label has 22 digits, past 64 bits",
        ],
    ),
    "huge value": (
        line("DCGM_FI_DEV_FB_USED", "9" * 400) + GOOD,
        ["line 1: DCGM_FI_DEV_FB_USED: a 1329-bit value, past any float"],
    ),
    "seconds": (
        line("DCGM_FI_DEV_FB_USED", "1", at="1764547200") + GOOD,
        [
            "line 1: DCGM_FI_DEV_FB_USED: timestamp 1764547200 ms is 1970-01-21T10:09:07Z, "
            "before 2015-01-01; the exporter probably sent seconds"
        ],
    ),
    "conflict": (
        line("DCGM_FI_DEV_FB_USED", "1") + line("DCGM_FI_DEV_FB_USED", "2") + GOOD,
        ["lines 1, 2: n1 GPU 0: DCGM_FI_DEV_FB_USED has 2 values (1.0 on line 1, 2.0 on line 2)"],
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_PAGES))
def test_refused_lines_are_one_line_each_and_the_rest_is_printed(case: str, tmp_path: Path) -> None:
    text, expected = BAD_PAGES[case]
    path = tmp_path / "page.txt"
    path.write_text(text)
    out = gpufrag("dcgm-parse", str(path))
    assert out.returncode == 1
    samples = [from_json(GpuSample, x) for x in out.stdout.splitlines()]
    assert [(s.gpu_index, s.memory_used_mib, s.utilization_pct) for s in samples] == [
        (1, 1024.0, 9.0)
    ]
    err = out.stderr.splitlines()
    refused = sum(len(e.split(":")[0].split(",")) for e in expected)
    assert err[0].startswith(f"{refused} lines refused (")
    assert [e.strip() for e in err[1:-1]] == expected
    assert err[-1] == f"gpufrag: error: {refused} lines of {path} refused; 1 samples printed"


def test_a_file_over_the_cap_is_one_line_and_status_2(tmp_path: Path) -> None:
    path = tmp_path / "page.txt"
    path.write_bytes((FIXTURES / "plain_h200.txt").read_bytes())  # 13,228 bytes
    out = gpufrag("dcgm-parse", str(path), env={"GPUFRAG_DCGM__MAX_PAGE_BYTES": "10000"})
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr == (
        f"gpufrag: error: {path} is over 10000 bytes (GPUFRAG_DCGM__MAX_PAGE_BYTES); "
        "a dcgm-exporter page is about 5 KB per GPU\n"
    )


def test_the_default_cap_is_far_below_what_a_page_costs_to_parse(tmp_path: Path) -> None:
    # 4 MiB: twelve 64-GPU pages (about 340 KB each); a 10 MB page of odd lines cost 9.3 s
    # and 519 MB under the old 16 MiB default
    path = tmp_path / "page.txt"
    plain = (FIXTURES / "plain_h200.txt").read_bytes()
    path.write_bytes(plain * (4 * 1024 * 1024 // len(plain) + 1))
    out = gpufrag("dcgm-parse", str(path))
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr == (
        f"gpufrag: error: {path} is over 4194304 bytes (GPUFRAG_DCGM__MAX_PAGE_BYTES); "
        "a dcgm-exporter page is about 5 KB per GPU\n"
    )


def test_an_endless_input_stops_at_the_cap() -> None:
    # /dev/zero never ends: read whole first and compared after, this would never return
    out = gpufrag("dcgm-parse", "/dev/zero", env={"GPUFRAG_DCGM__MAX_PAGE_BYTES": "65536"})
    assert out.returncode == 2
    assert out.stderr == (
        "gpufrag: error: /dev/zero is over 65536 bytes (GPUFRAG_DCGM__MAX_PAGE_BYTES); "
        "a dcgm-exporter page is about 5 KB per GPU\n"
    )


def test_binary_garbage_lists_a_bounded_number_of_lines(tmp_path: Path) -> None:
    path = tmp_path / "page.bin"
    path.write_bytes(b"\xff\xfe\x00garbage\n" * 500)
    out = gpufrag("dcgm-parse", str(path))
    assert out.returncode == 1 and out.stdout == ""
    err = out.stderr.splitlines()
    assert err[0] == "500 lines refused (500 encoding):"
    assert err[1] == "  line 1: not UTF-8 text"
    assert err[101] == "  ... 400 more not shown"
    assert err[-1] == f"gpufrag: error: no GPU samples in {path}"
    assert len(err) == 103


@pytest.mark.parametrize(
    ("env", "words"),
    [
        ({"GPUFRAG_DCGM__MAX_PAGE_BYTES": "0"}, "GPUFRAG_DCGM__MAX_PAGE_BYTES"),
        ({"GPUFRAG_DCGM__MIN_TIMESTAMP": "2015-01-01T00:00:00"}, "GPUFRAG_DCGM__MIN_TIMESTAMP"),
    ],
)
def test_a_bad_setting_is_one_line(env: dict[str, str], words: str) -> None:
    out = gpufrag("dcgm-parse", str(FIXTURES / "plain_h200.txt"), env=env)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and words in out.stderr


def test_an_empty_file_makes_no_samples(tmp_path: Path) -> None:
    path = tmp_path / "empty.txt"
    path.write_bytes(b"")
    out = gpufrag("dcgm-parse", str(path))
    assert out.returncode == 1
    assert out.stderr == f"gpufrag: error: no GPU samples in {path}\n"
