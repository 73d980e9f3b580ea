"""A replay killed with SIGKILL, as a user's machine kills one: the next command that opens the
store finds its run abandoned, and the read commands read the run before it and say so."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from tests.app.pipeline_helpers import dsn_for, gpufrag, gpufrag_env, store_at
from tests.app.reference_replay import NODE_LIMIT
from tests.ports import free_port

DEADLINE_S = 180  # generous: a busy 2-core machine starts chDB and the pipeline slowly


def _rows_written(port: int, table: str) -> float:
    """The replay's own count of rows stored, from its metrics; 0 until it serves them."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            text = r.read().decode()
    except OSError:
        return 0.0
    pattern = rf'^gpufrag_sink_rows_written_total\{{table="{table}"\}} (\S+)$'
    found = re.search(pattern, text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def _start_slow_replay(dsn: str, port: int) -> subprocess.Popen[str]:
    """Another seed is another run; at 2x the trace's pace it takes minutes, so it is
    still running whenever the test gets round to killing it."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streams.app",
            "replay",
            "--node-limit",
            str(NODE_LIMIT),
            "--seed",
            "7",
            "--speed",
            "2",
            "--metrics-port",
            str(port),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=gpufrag_env(dsn),
    )


def _wait_until_storing(proc: subprocess.Popen[str], port: int) -> None:
    """The metrics are served after the run's ``running`` row is written (the store cannot
    be read from here meanwhile: the replay holds its lock), and rows written to ``events``
    mean the kill lands mid-run."""
    deadline = time.monotonic() + DEADLINE_S
    while _rows_written(port, "events") <= 0:
        if proc.poll() is not None:
            raise AssertionError(f"the replay ended early:\n{proc.communicate()[1]}")
        assert time.monotonic() < deadline, "the replay stored no event in time"
        time.sleep(0.1)


def test_a_killed_replay_is_abandoned_and_reads_default_to_the_run_before(
    tmp_path: Path,
) -> None:
    dsn = dsn_for(tmp_path / "st")
    first = gpufrag(dsn, "replay", "--node-limit", str(NODE_LIMIT), "--json")
    assert first.returncode == 0, first.stderr
    done = json.loads(first.stdout)["run_id"]

    port = free_port()
    proc = _start_slow_replay(dsn, port)
    try:
        _wait_until_storing(proc, port)
        # a live writer holds the lock: a read command cannot open the store, so it can
        # neither read nor mark the live run
        busy = gpufrag(dsn, "sql", "pending_with_free_capacity")
        assert busy.returncode == 2
        assert "is in use by another gpufrag process" in busy.stderr
        proc.send_signal(signal.SIGKILL)
    finally:
        if proc.poll() is None:
            proc.kill()
        _, replay_err = proc.communicate(timeout=DEADLINE_S)
    assert proc.returncode == -signal.SIGKILL
    killed = re.search(r", run ([0-9a-f]{16});", replay_err)
    assert killed, replay_err
    dead = killed.group(1)
    assert dead != done

    out = gpufrag(dsn, "sql", "pending_with_free_capacity", "--format", "json")
    assert out.returncode == 0, out.stderr
    assert out.stderr.splitlines() == [
        f"gpufrag: run {dead} was left running by a process that is gone; marked abandoned",
        f"gpufrag: reading run {done} (finished {_minute_of(out.stderr)} UTC); newer run "
        f"{dead} is abandoned",
    ]
    named = gpufrag(
        dsn, "sql", "pending_with_free_capacity", "--format", "json", "-p", f"run_id={done}"
    )
    assert named.returncode == 0 and named.stderr == ""  # a finished run named: nothing to say
    assert json.loads(out.stdout) == json.loads(named.stdout) != []

    with store_at(dsn) as st:
        status = dict(st.query("SELECT run_id, status FROM runs FINAL").rows)
        events = dict(st.query("SELECT run_id, count() FROM events GROUP BY run_id").rows)
    assert status == {done: "finished", dead: "abandoned"}
    assert 0 < events[dead] < events[done]  # killed mid-run, and its rows are kept

    page = tmp_path / "r.html"
    report = gpufrag(dsn, "report", "--out", str(page))
    assert report.returncode == 0, report.stderr
    assert f"(run {done})" in report.stdout
    assert report.stderr.startswith(f"gpufrag: reading run {done} (finished ")
    assert report.stderr.rstrip().endswith(f"newer run {dead} is abandoned")
    assert "did not finish" not in page.read_text()

    partial = gpufrag(dsn, "report", "--run", dead, "--out", str(page))
    assert partial.returncode == 0, partial.stderr
    assert partial.stderr.startswith(f"gpufrag: reading run {dead} (abandoned, started ")
    assert "This run did not finish (abandoned)" in page.read_text()


def _minute_of(stderr: str) -> str:
    found = re.search(r"\(finished (\d{4}-\d\d-\d\d \d\d:\d\d) UTC\)", stderr)
    assert found, stderr
    return found.group(1)
