"""SIGTERM while a replay's store is not taking rows: the replay stops at once, spools what it
holds, prints its summary and records the run as interrupted, instead of retrying for ever.

The command runs in this process (a subprocess's store cannot be taken away from outside: chDB
locks it), so a thread can detach a table from under it through the same engine, and the
signal is a real SIGTERM to this process, handled by the replay's own handlers."""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from connectors.clickhouse.dsn import StoreError
from connectors.clickhouse.spool import read_spool
from connectors.clickhouse.store import Store
from streams.app.cli import build_app
from tests.app.pipeline_helpers import count, dsn_for, store_at

RESCUE_AFTER_S = 120.0
"""Without the fix the replay waits for the store for ever; the table comes back after this
long so that such a run still ends (and the test fails on ``rescued``)."""


class _TakeTheStoreAway(threading.Thread):
    """Waits until the replay stores events, detaches ``events``, sends SIGTERM once the sink
    retries, and puts the table back once the replay has ended (or, failing that, after
    RESCUE_AFTER_S)."""

    def __init__(self, dsn: str, path: Path) -> None:
        super().__init__(daemon=True)
        self.dsn, self.path = dsn, path
        self.ended = threading.Event()
        self.signalled = threading.Event()
        self.rescued = False
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self._run()
        except BaseException as exc:  # reported by the test
            self.error = exc

    def _run(self) -> None:
        deadline = time.monotonic() + 300
        while not self.path.exists():
            assert time.monotonic() < deadline, "the replay never created its store"
            time.sleep(0.05)
        with store_at(self.dsn) as st:
            while not _stored_events(st):
                assert time.monotonic() < deadline, "the replay never stored an event"
                time.sleep(0.05)
            retrying = _Retrying()
            sink_log = logging.getLogger("connectors.clickhouse.sink")
            sink_log.addHandler(retrying)
            try:
                st.command("DETACH TABLE events")
                # the signal comes while the sink retries, not before it has rows to retry
                assert retrying.seen.wait(300), "the sink never retried"
            finally:
                sink_log.removeHandler(retrying)
            os.kill(os.getpid(), signal.SIGTERM)
            self.signalled.set()
            self.rescued = not self.ended.wait(RESCUE_AFTER_S)
            st.command("ATTACH TABLE events")


class _Retrying(logging.Handler):
    """Sees the sink's "store outage writing ..., retrying" line."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.seen = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("store outage writing events"):
            self.seen.set()


def _stored_events(st: Store) -> int:
    try:
        return count(st, "events")
    except StoreError:  # not migrated yet
        return 0


def test_sigterm_while_the_store_is_down_stops_at_once_with_a_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "st"
    dsn = dsn_for(path)
    helper = _TakeTheStoreAway(dsn, path)
    before = signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, lambda *_: None)  # between the replay's handlers: ignored
    helper.start()
    try:
        # --speed 5 keeps the replay going for minutes, so it is mid-run when the store goes
        args = ["replay", "--node-limit", "40", "--speed", "5", "--store", dsn, "--json"]
        rc = build_app(["replay"])(args=args, standalone_mode=False)
    finally:
        helper.ended.set()
        helper.join(60)
        signal.signal(signal.SIGTERM, before)
    assert helper.error is None, helper.error
    assert helper.signalled.is_set() and not helper.rescued
    out = capsys.readouterr()
    assert rc == 130, out.err
    assert "the store is not taking rows: spooling unwritten rows and stopping" in out.err
    summary = json.loads(out.out)
    assert summary["status"] == "interrupted" and summary["events"] > 0
    files, bad = read_spool(Path(f"{path}.spool"))
    spooled = sum(1 for f in files for table, _ in f.rows if table == "events")
    assert not bad and spooled > 0
    assert f"the {sum(len(f.rows) for f in files)} unwritten rows in {files[0].path}" in out.err
    with store_at(dsn) as st:
        assert st.query("SELECT status FROM runs FINAL").rows == [("interrupted",)]
        # what was stored plus what was spooled is every event the summary counts
        assert count(st, "events", final=True) + spooled >= summary["events"]
