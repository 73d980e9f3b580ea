"""Bad settings and a store folder that is not a store, as a user meets them: one line each,
naming what to fix, and no traceback."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

LONG = "9" * 5000


def replay(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "streams.app", "replay", "--node-limit", "3"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "GPUFRAG_STORE__DSN": f"chdb://{tmp_path}/st", **env},
    )


@pytest.mark.parametrize(
    ("env", "line"),
    [
        (
            {"GPUFRAG_STORE_BATCH_ROWS": "100"},
            "unknown setting GPUFRAG_STORE_BATCH_ROWS; did you mean GPUFRAG_STORE__BATCH_ROWS?",
        ),
        ({"GPUFRAG_NOPE": "1"}, "unknown setting GPUFRAG_NOPE"),
        (
            {"GPUFRAG_STORE": "notjson"},
            "setting GPUFRAG_STORE: not valid JSON (Expecting value); groups and lists are JSON",
        ),
        (
            {"GPUFRAG_STORE": '{"batch_rows": ' + LONG + "}"},
            "setting GPUFRAG_STORE: not valid JSON (Exceeds the limit (4300 digits) for integer "
            "string conversion); groups and lists are JSON",
        ),
        (
            {"GPUFRAG_KUBE__RESOURCES": LONG},
            "setting GPUFRAG_KUBE__RESOURCES: not valid JSON (Exceeds the limit (4300 digits) "
            "for integer string conversion); groups and lists are JSON",
        ),
        (
            {"GPUFRAG_DETECTORS__UNPLACEABLE_PENDING__EVALUATE_EVERY_S": "inf"},
            "setting GPUFRAG_DETECTORS__UNPLACEABLE_PENDING__EVALUATE_EVERY_S: "
            "Input should be a finite number",
        ),
        (
            {"GPUFRAG_STORE__MAX_BUFFERED_ROWS": "20"},
            "setting GPUFRAG_STORE__MAX_BUFFERED_ROWS: Input should be greater than or equal "
            "to 1000",
        ),
    ],
    ids=["one_underscore", "unknown", "not_json", "long_int_json", "long_int_list", "inf", "buf"],
)
def test_a_bad_setting_is_one_line(tmp_path: Path, env: dict[str, str], line: str) -> None:
    out = replay(tmp_path, **env)
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip().splitlines() == [f"gpufrag: error: {line}"]
    assert not (tmp_path / "st").exists()  # refused before anything was written


def test_a_folder_of_other_files_is_not_made_a_store(tmp_path: Path) -> None:
    folder = tmp_path / "st"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    out = replay(tmp_path)
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip().splitlines() == [
        f"gpufrag: error: {folder} holds other files and is not a chDB store (no metadata/ "
        "folder): give a new or empty folder, or an existing store"
    ]
    assert [p.name for p in folder.iterdir()] == ["notes.txt"]


def test_a_replay_with_the_smallest_buffer_stops_on_one_sigterm(tmp_path: Path) -> None:
    # The buffer fills over several tables, none with a full batch: the writers waited for
    # the flush interval (an hour here), and the replay ignored SIGTERM (issue 32, C7).
    env = {
        **os.environ,
        "GPUFRAG_STORE__DSN": f"chdb://{tmp_path}/st",
        "GPUFRAG_STORE__BATCH_ROWS": "1000",
        "GPUFRAG_STORE__MAX_BUFFERED_ROWS": "1000",
        "GPUFRAG_STORE__FLUSH_INTERVAL_S": "3600",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "streams.app", "replay", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stderr is not None
    assert "replaying trace:" in proc.stderr.readline()
    proc.send_signal(signal.SIGTERM)
    try:
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 130, stderr
    assert '"status":"interrupted"' in stdout
