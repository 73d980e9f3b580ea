"""A paced replay's domain gauges, scraped over HTTP while it runs, equal the rows its store
keeps for the same event-time instant.

Every scrape names its instant (``gpufrag_cluster_report_timestamp_seconds``), and the store
keeps one ``cluster_frag`` row per instant, so each scrape is compared with the row of its
own instant, whenever the scrape happened. Only the last instant is left out: the end of the
input may report it twice (its evaluation, then the flush), and a scrape may fall between."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.app.metrics_scrape import Scrape, compare, instant_of, parse, rows_by_instant
from tests.app.pipeline_helpers import dsn_for, store_at
from tests.http_probe import get
from tests.paths import REPO_ROOT
from tests.ports import free_port

DEADLINE_S = 300.0


def _scrape_until_exit(port: int, proc: subprocess.Popen[bytes]) -> dict[int, Scrape]:
    """Scrapes by their instant in ms, the first of each instant, until the replay exits."""
    scrapes: dict[int, Scrape] = {}
    deadline = time.monotonic() + DEADLINE_S
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            status, body = get(port, "/metrics")
        except OSError:  # not serving yet, or gone
            time.sleep(0.2)
            continue
        assert status == 200
        scrape = parse(body)
        at = instant_of(scrape)
        if at is not None:
            scrapes.setdefault(at, scrape)
        time.sleep(0.2)  # a poll interval, not a wait for something to happen
    return scrapes


@pytest.mark.deploy
def test_a_paced_replays_gauges_equal_its_stored_rows(tmp_path: Path) -> None:
    port = free_port()
    dsn = dsn_for(tmp_path / "store")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUFRAG_")}
    log = tmp_path / "replay.log"
    # 30 nodes: 380 events over 162 s of event time, so about 40 s at 4x
    argv = ["replay", "--node-limit", "30", "--speed", "4", "--store", dsn]
    proc = subprocess.Popen(
        [sys.executable, "-m", "streams.app", *argv, "--metrics-port", str(port)],
        cwd=REPO_ROOT,
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    try:
        scrapes = _scrape_until_exit(port, proc)
        proc.wait(DEADLINE_S)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, log.read_text()[-3000:]
    with store_at(dsn) as store:
        rows = rows_by_instant(store)
    last = max(rows)
    compared = [at for at in scrapes if at != last]
    for at in compared:
        compare(scrapes[at], rows[at])
    # a 40 s run scraped every few tenths of a second: many instants, not one lucky one
    assert len(compared) >= 5, sorted(scrapes)
    assert any(s[("gpufrag_cluster_fragmentation_gpus", ())] > 0 for s in scrapes.values())
