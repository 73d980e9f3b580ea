"""Numbered migrations: applied in order, once, and failures name their file."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from connectors.clickhouse import Store, StoreError, apply_migrations, default_sql_dir, open_store
from connectors.clickhouse.migrate import load_migrations, split_statements
from models.settings import StoreSettings
from tests.connectors.clickhouse.helpers import count

TABLES = {
    "runs",
    "events",
    "gpu_samples",
    "node_profiles",
    "task_profiles",
    "task_memory_peaks",
    "signals",
    "actions",
    "pending_explanations",
    "cluster_frag",
    "cluster_frag_1m",
    "dead_letter",
    "run_writers",
    "schema_migrations",
}


def _schema(store: Store) -> dict[str, str]:
    rows = store.query(
        "SELECT name, create_table_query FROM system.tables WHERE database = currentDatabase()"
    ).rows
    return {str(name): str(ddl) for name, ddl in rows}


def test_default_sql_dir_holds_the_numbered_files() -> None:
    names = [m.name for m in load_migrations(default_sql_dir())]
    assert names[0] == "001_runs.sql"
    assert names == sorted(names)
    assert len(names) >= 10


def test_migrations_apply_in_order_then_nothing_the_second_time(store: Store) -> None:
    # The fixture applied them already; a fresh apply finds nothing to do ...
    before = _schema(store)
    assert set(before) == TABLES
    assert apply_migrations(store, default_sql_dir()) == []
    # ... and changes nothing.
    assert _schema(store) == before
    assert count(store, "schema_migrations", final=True) == len(load_migrations(default_sql_dir()))
    versions = store.query("SELECT version, name FROM schema_migrations FINAL ORDER BY version")
    assert versions.rows[0] == (1, "001_runs.sql")
    assert [v for v, _ in versions.rows] == sorted(v for v, _ in versions.rows)


def test_first_apply_returns_every_name(store: Store, tmp_path: Path) -> None:
    sql = tmp_path / "m"
    sql.mkdir()
    (sql / "002_b.sql").write_text("CREATE TABLE IF NOT EXISTS b (x UInt8) ENGINE = Memory;\n")
    (sql / "001_a.sql").write_text(
        "-- two statements; comment lines are dropped\n"
        "CREATE TABLE IF NOT EXISTS a (x UInt8) ENGINE = Memory;\n"
        "CREATE VIEW IF NOT EXISTS a_v AS SELECT x FROM a;\n"
    )
    # The fixture recorded the repository's versions 1..10; start the record afresh so these
    # files' versions are new.
    store.command("DROP TABLE schema_migrations")
    assert apply_migrations(store, sql) == ["001_a.sql", "002_b.sql"]
    assert apply_migrations(store, sql) == []
    assert store.query("EXISTS TABLE a_v").rows == [(1,)]


def test_a_failing_statement_names_its_file(store: Store, tmp_path: Path) -> None:
    sql = tmp_path / "m"
    sql.mkdir()
    (sql / "001_ok.sql").write_text("CREATE TABLE IF NOT EXISTS ok_t (x UInt8) ENGINE = Memory;\n")
    (sql / "002_broken.sql").write_text(
        "CREATE TABLE IF NOT EXISTS fine_t (x UInt8) ENGINE = Memory;\n"
        "CREATE TABLE IF NOT EXISTS broken_t (x NoSuchType) ENGINE = Memory;\n"
    )
    store.command("DROP TABLE schema_migrations")
    with pytest.raises(StoreError) as info:
        apply_migrations(store, sql)
    message = info.value.message
    assert message.startswith("migration 002_broken.sql failed at statement 2: ")
    assert "NoSuchType" in message
    # The good file was recorded; after the fix only the broken one is applied.
    (sql / "002_broken.sql").write_text(
        "CREATE TABLE IF NOT EXISTS broken_t (x UInt8) ENGINE = Memory;\n"
    )
    assert apply_migrations(store, sql) == ["002_broken.sql"]


def test_a_renamed_applied_migration_is_an_error(store: Store, tmp_path: Path) -> None:
    sql = tmp_path / "m"
    sql.mkdir()
    for path in default_sql_dir().glob("*.sql"):
        (sql / path.name).write_text(path.read_text())
    (sql / "003_gpu_samples.sql").rename(sql / "003_renamed.sql")
    with pytest.raises(StoreError, match=r"applied as 003_gpu_samples\.sql but the file is now"):
        apply_migrations(store, sql)


def test_missing_or_misnamed_files_are_errors(store: Store, tmp_path: Path) -> None:
    with pytest.raises(StoreError, match=r"migrations folder .* is missing"):
        apply_migrations(store, tmp_path / "nowhere")
    sql = tmp_path / "m"
    sql.mkdir()
    (sql / "first.sql").write_text("SELECT 1;")
    with pytest.raises(StoreError, match=r"must be named NNN_name\.sql"):
        load_migrations(sql)
    (sql / "first.sql").unlink()
    (sql / "001_a.sql").write_text("SELECT 1;")
    (sql / "01_b.sql").write_text("SELECT 1;")
    with pytest.raises(StoreError, match="share version 1"):
        load_migrations(sql)


def test_split_statements() -> None:
    text = (
        "-- header\n"
        "CREATE TABLE t\n(\n    a String,   -- inline comments stay; ClickHouse reads them\n)\n"
        "ENGINE = Memory;\n\n"
        "  -- indented comment\n"
        "CREATE VIEW v AS SELECT 'a;b' AS s;  \n"
    )
    assert split_statements(text) == [
        "CREATE TABLE t\n(\n    a String,   -- inline comments stay; ClickHouse reads them\n)\n"
        "ENGINE = Memory",
        "CREATE VIEW v AS SELECT 'a;b' AS s",
    ]


def test_013_adds_the_schedulers_verdict_to_a_store_with_explanations(
    store_settings: StoreSettings, tmp_path: Path
) -> None:
    sql = tmp_path / "m"
    sql.mkdir()
    for path in default_sql_dir().glob("*.sql"):
        if int(path.name[:3]) <= 12:
            (sql / path.name).write_text(path.read_text())
    old = {
        "run_id": "r0",
        "ts": datetime(2026, 1, 5, tzinfo=UTC),
        "pod": "ml/p",
        "namespace": "ml",
        "queue": None,
        "gpu_count": 1,
        "gpu_milli": 1000,
        "cpu_milli": 1_000,
        "memory_mib": 1_024,
        "fits_cluster_total": 1,
        "fits_some_node": 0,
        "unplaceable": 1,
        "reasons": {"gpu_count": 3},
        "near_misses": "[]",
        "nodes_checked": 3,
    }
    store = open_store(store_settings)
    try:
        apply_migrations(store, sql)
        store.insert("pending_explanations", [old])
        (sql / "013_scheduler_verdicts.sql").write_text(
            (default_sql_dir() / "013_scheduler_verdicts.sql").read_text()
        )
        assert apply_migrations(store, sql) == ["013_scheduler_verdicts.sql"]
        (row,) = store.query(
            "SELECT scheduler_at, scheduler_nodes, scheduler_reasons, scheduler_message, agrees, "
            "disagreement FROM pending_explanations"
        ).dicts()
        # a row written before: no verdict, nothing compared
        assert row == {
            "scheduler_at": None,
            "scheduler_nodes": None,
            "scheduler_reasons": {},
            "scheduler_message": None,
            "agrees": None,
            "disagreement": "",
        }
    finally:
        store.close()
