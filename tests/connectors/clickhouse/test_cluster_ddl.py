"""`gpufrag migrate --cluster NAME`: the history's DDL for a ClickHouse cluster. No ClickHouse
server (let alone a cluster with its keeper) runs here, so every statement is checked with
ClickHouse's own parser (chDB's ``EXPLAIN AST``), and its shape against the single-node
migrations it comes from."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from connectors.clickhouse.cluster_ddl import SHARDING, cluster_statements
from connectors.clickhouse.dsn import StoreError
from connectors.clickhouse.migrate import SCHEMA_TABLE, default_sql_dir, load_migrations
from connectors.clickhouse.store import Store
from streams.app.cli import app_for

ARGV = ["migrate", "--cluster", "gpu_fleet"]


def _printed() -> list[str]:
    out = CliRunner().invoke(app_for(ARGV), ARGV, env={"GPUFRAG_STORE__DATABASE": "history"})
    assert out.exit_code == 0, out.output
    return [s.strip() for s in out.output.split(";\n\n") if s.strip()]


def _single_node_tables() -> dict[str, list[str]]:
    """Table -> its ORDER BY columns, from the migrations (and the migrations' own table)."""
    out = {SCHEMA_TABLE: ["version"]}
    for migration in load_migrations(default_sql_dir()):
        for sql in migration.statements():
            if m := re.match(r"CREATE TABLE IF NOT EXISTS (\w+)", sql):
                order = re.search(r"ORDER BY \(?([\w, ]+)\)?", sql)
                assert order is not None, sql
                out[m[1]] = [c.strip() for c in order[1].split(",")]
    return out


def test_every_statement_parses_with_clickhouses_own_parser(store: Store) -> None:
    statements = _printed()
    for sql in statements:
        ast = store.query(f"EXPLAIN AST {sql.rstrip(';')}").rows
        assert ast, sql
    assert statements[0] == "CREATE DATABASE IF NOT EXISTS history ON CLUSTER gpu_fleet"
    assert statements[-1].startswith(f"INSERT INTO history.{SCHEMA_TABLE} (version, name")
    names = [m.name for m in load_migrations(default_sql_dir())]
    assert all(f"'{n}'" in statements[-1] for n in names)  # a process finds them applied


def test_each_table_is_replicated_on_every_node_and_distributed_over_them() -> None:
    statements = _printed()
    tables = _single_node_tables()
    for table, order in tables.items():
        local = [
            s
            for s in statements
            if s.startswith(
                f"CREATE TABLE IF NOT EXISTS history.{table}_local ON CLUSTER gpu_fleet"
            )
        ]
        assert len(local) == 1, table
        assert (
            "ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/history/" in local[0]
        )
        (dist,) = [
            s
            for s in statements
            if s.startswith(f"CREATE TABLE IF NOT EXISTS history.{table} ON CLUSTER")
        ]
        key = SHARDING[table]
        assert dist.endswith(f"ENGINE = Distributed(gpu_fleet, history, {table}_local, {key})")
        # rows of one sorting key on one shard: FINAL deduplicates within a shard only
        key_columns = re.findall(r"\w+", key.removeprefix("cityHash64"))
        assert key_columns and set(key_columns) <= set(order), (table, key, order)
    # the single-node engine is gone everywhere, and no table is left without its pair
    assert not any(re.search(r"ENGINE = ReplacingMergeTree", s) for s in statements)
    assert set(SHARDING) == set(tables)


def test_changes_go_to_both_tables_and_views_read_the_distributed_ones() -> None:
    statements = _printed()
    alters = [s for s in statements if s.startswith("ALTER TABLE")]
    locals_ = [s for s in alters if re.match(r"ALTER TABLE history\.\w+_local ON CLUSTER", s)]
    assert alters and len(locals_) * 2 == len(alters)
    for s in locals_:
        twin = re.sub(r"^ALTER TABLE history\.(\w+)_local", r"ALTER TABLE history.\1", s)
        assert twin in alters
    (view,) = [s for s in statements if s.startswith("CREATE VIEW")]
    assert view.startswith("CREATE VIEW IF NOT EXISTS history.cluster_frag_1m ON CLUSTER gpu_fleet")
    assert "FROM history.cluster_frag FINAL" in view


def test_a_statement_without_a_cluster_form_is_refused_by_name(tmp_path: Path) -> None:
    (tmp_path / "001_t.sql").write_text("DROP TABLE IF EXISTS signals;\n")
    with pytest.raises(StoreError, match=re.escape("001_t.sql statement 1: no cluster form")):
        cluster_statements(load_migrations(tmp_path), cluster="c", database="d")
    with pytest.raises(StoreError, match="cluster name"):
        cluster_statements([], cluster="c; DROP", database="d")
