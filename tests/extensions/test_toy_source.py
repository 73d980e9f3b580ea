"""A live source from a plugin, with no edit to any product module: `gpufrag watch --bus
embedded --source toy` loads ``tests.extensions.toy_source`` (``GPUFRAG_PLUGINS``) and the toy's
node and pod events reach the history store as the run's events; a source name nobody
registered is refused in one line with the known names."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from pathlib import Path

from tests.app.pipeline_helpers import dsn_for, store_at
from tests.app.watch_helpers import run_watch, sample_value
from tests.extensions.toy_source import NODES, POD
from tests.ports import free_port

ROOT = Path(__file__).parents[2]
TOY = f"toy@{socket.gethostname()}"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUFRAG_")}
    return {**env, "PYTHONPATH": str(ROOT), "COLUMNS": "200", **extra}


async def test_the_toy_sources_events_reach_the_store(tmp_path: Path) -> None:
    dsn = dsn_for(tmp_path / "store")

    def ready(page: str) -> bool:
        return (sample_value(page, "gpufrag_watch_events_total", source=TOY) or 0) >= 3

    done = await run_watch(
        "--no-kube",
        "--source",
        "toy",
        "--bus",
        "embedded",
        "--store",
        dsn,
        env=_env(GPUFRAG_PLUGINS='["tests.extensions.toy_source"]'),
        metrics_port=free_port(),
        ready=ready,
        terminate_when_ready=True,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "(finished)" in done.stdout, done.stdout
    run_id = done.stdout.split("run ", 1)[1].split()[0]
    with store_at(dsn) as store:
        events = store.query(
            "SELECT kind, key, source FROM events FINAL WHERE run_id = {r:String} ORDER BY key",
            {"r": run_id},
        ).rows
        run = store.query(
            "SELECT status, source FROM runs FINAL WHERE run_id = {r:String}", {"r": run_id}
        ).rows
    assert [tuple(map(str, e)) for e in events] == [
        ("node", NODES[0], "toy"),
        ("node", NODES[1], "toy"),
        ("pod", f"toy/{POD}", "toy"),
    ]
    assert run == [("finished", f"watch:{TOY}")]


async def test_a_source_name_nobody_registered_is_refused_with_the_known_names() -> None:
    proc = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "streams.app", "watch", "--no-kube", "--source", "slurm"),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=_env(GPUFRAG_PLUGINS='["tests.extensions.toy_source"]'),
    )
    _, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 2, err.decode()
    assert err.decode().splitlines() == [
        "gpufrag: error: unknown live source 'slurm' (known: toy, kube, dcgm, nvml)"
    ]
