"""Running the real `gpufrag` command against a throwaway chDB store, and reading it back."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from connectors.clickhouse.store import Store, open_store
from models import StoreSettings


def gpufrag_env(dsn: str) -> dict[str, str]:
    env = dict(os.environ)
    env["GPUFRAG_STORE__DSN"] = dsn
    env.pop("COLUMNS", None)
    return env


def gpufrag(dsn: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "streams.app", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=gpufrag_env(dsn),
    )


@contextmanager
def store_at(dsn: str) -> Iterator[Store]:
    store = open_store(StoreSettings(dsn=dsn))
    try:
        yield store
    finally:
        store.close()


def count(store: Store, table: str, *, final: bool = False) -> int:
    res = store.query(f"SELECT count() FROM {table}{' FINAL' if final else ''}")
    return int(str(res.rows[0][0]))


def dsn_for(path: Path) -> str:
    return f"chdb://{path}"
