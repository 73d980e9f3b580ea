"""Fuzzed `sql --query` texts built from SQL fragments never change the store, never create a
file outside it and never open a socket.

The fragments are the pieces hostile queries are made of (writes, table functions, file and
network functions, output clauses, settings, quotes, comments, statement separators) and
harmless reads, joined in random order with random separators, so most texts are nonsense,
some parse, and a few are valid reads that run. Whatever the check or the engine says, the
watch afterwards must find nothing touched."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from connectors.clickhouse.dsn import StoreError
from models.settings import SqlSettings
from streams.app.queries.adhoc_sql import run_adhoc
from streams.app.queries.named_queries import QueryError
from tests.app.sql_probe import Probe, Snapshot, probe_in, store_snapshot

LIMITS = SqlSettings(max_execution_time_s=5.0, max_result_rows=1000)

FRAGMENTS = [
    "SELECT",
    "SELECT 1",
    "SELECT *",
    "SELECT count()",
    "FROM runs",
    "FROM gpufrag.runs",
    "FROM system.numbers",
    "FROM system.tables",
    "WHERE 1",
    "WHERE run_id IN system.users",
    "UNION ALL",
    "INTERSECT",
    "WITH x AS (SELECT 1)",
    "WITH (SELECT file('{canary}')) AS f",
    "file('{canary}')",
    "FILE('{canary}', 'LineAsString')",
    "url('http://127.0.0.1:{port}/x', CSV, 'a String')",
    "remote('127.0.0.1:{port}', system.one)",
    "s3('http://127.0.0.1:{port}/b/k', CSV, 'a String')",
    "executable('id', CSV, 'a String')",
    "hasColumnInTable('127.0.0.1:{port}', 'system', 'one', 'dummy')",
    "INSERT INTO runs (run_id) VALUES ('fz')",
    "INSERT INTO FUNCTION file('{out}', 'CSV', 'x UInt8') SELECT 1",
    "INTO OUTFILE '{out}'",
    "INTO OUTFILE '{out}' APPEND",
    "FORMAT CSV",
    "SETTINGS readonly = 0",
    "SETTINGS max_result_rows = 0",
    "SET readonly = 0",
    "CREATE TABLE fz (x UInt8) ENGINE = Memory",
    "DROP TABLE runs",
    "TRUNCATE TABLE runs",
    "ALTER TABLE runs DELETE WHERE 1",
    "RENAME TABLE runs TO fz",
    "OPTIMIZE TABLE runs FINAL",
    "SYSTEM STOP MERGES",
    "DESCRIBE",
    "EXPLAIN",
    "(",
    ")",
    ",",
    ";",
    "'",
    '"',
    "`",
    "$$",
    "$t$",
    "--",
    "#",
    "/*",
    "*/",
    "\\",
    "AS",
    "IN",
]
SEPARATORS = [" ", "\n", "", "\t", " /* c */ ", " -- c\n"]


@st.composite
def texts(draw: st.DrawFn) -> str:
    parts = draw(st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=9))
    seps = draw(st.lists(st.sampled_from(SEPARATORS), min_size=len(parts), max_size=len(parts)))
    return "".join(p + s for p, s in zip(parts, seps, strict=True))


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Probe]:
    yield from probe_in(tmp_path_factory.mktemp("fuzz"), LIMITS)


def files_under(root: Path) -> set[Path]:
    return set(root.rglob("*"))


def test_fuzzed_queries_touch_nothing(probe: Probe) -> None:
    store, session, watch = probe
    before: Snapshot = store_snapshot(store)
    root_files = files_under(watch.root)
    seen = {"refused": 0, "ran": 0, "engine": 0}

    @settings(
        max_examples=2000,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(text=texts())
    def one(text: str) -> None:
        query = watch.fill(text)
        try:
            res = run_adhoc(session, query, {}, limits=LIMITS)
            seen["ran"] += 1
            assert "canary-7f3a" not in repr(res.rows)
        except QueryError:
            seen["refused"] += 1
        except StoreError as exc:
            seen["engine"] += 1
            assert "canary-7f3a" not in exc.message
        assert watch.untouched() == [], query
        assert store_snapshot(store) == before, query

    one()
    # nothing new beside the store, whose own files (parts, logs) may change as it merges
    new = {p for p in files_under(watch.root) - root_files if "store" not in p.parts}
    assert new == set()
    assert sum(seen.values()) >= 2000
    assert seen["refused"] > 0 and seen["ran"] > 0, seen
