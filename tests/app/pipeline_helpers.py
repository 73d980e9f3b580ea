"""Running the real `gpufrag` command against a throwaway chDB store, reading it back, and the
keys that compare stored signals with the operators' own."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson

from connectors.clickhouse.store import Store, open_store
from models import Signal, StoreSettings


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


def stored_signals(dsn: str) -> list[dict[str, object]]:
    with store_at(dsn) as st:
        res = st.query(
            "SELECT fingerprint, kind, scope_id, state, opened_at, resolved_at, evidence "
            "FROM signals FINAL ORDER BY fingerprint, opened_at, state"
        )
    return [dict(zip(res.columns, r, strict=True)) for r in res.rows]


def as_keys(signals: list[Signal]) -> list[tuple[object, ...]]:
    return sorted(
        (
            s.fingerprint,
            s.kind,
            s.scope_id,
            s.state,
            s.opened_at,
            s.resolved_at,
            orjson.dumps(s.evidence, option=orjson.OPT_SORT_KEYS),
        )
        for s in signals
    )


def stored_keys(rows: list[dict[str, object]]) -> list[tuple[object, ...]]:
    return sorted(
        (
            r["fingerprint"],
            r["kind"],
            r["scope_id"],
            r["state"],
            r["opened_at"],
            r["resolved_at"],
            orjson.dumps(orjson.loads(str(r["evidence"])), option=orjson.OPT_SORT_KEYS),
        )
        for r in rows
    )
