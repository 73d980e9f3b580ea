"""The history's DDL for a ClickHouse cluster: each migration rewritten for shards and replicas.

A single-node store keeps each table as a ``ReplacingMergeTree``. On a cluster each becomes
two: ``<table>_local``, a ``ReplicatedReplacingMergeTree`` on every node (``ON CLUSTER``), and
``<table>``, a ``Distributed`` table over them, under the same name the queries in ``sql/``
read and the sinks write. ``ALTER``s go to both; views are created on every node and read the
``Distributed`` tables.

The sharding key of each table is a hash of the columns of its sorting key that name what a
row is about, leaving out its time (``ts``, ``seq``...): rows with one key always land on one
shard, which ``FINAL``'s deduplication needs (it merges within a shard only), and a run spreads
over the shards by pod, node or signal, which the queries group by, instead of sitting on one.
Tables read whole per run (``runs``, ``cluster_frag``) are sharded by the run alone.

Only the statement forms the migrations use are rewritten; any other is refused by name, so a
new form is noticed when its migration is added, not on a cluster.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from connectors.clickhouse.dsn import StoreError
from connectors.clickhouse.migrate import SCHEMA_DDL, SCHEMA_TABLE, Migration

__all__ = ["SHARDING", "cluster_statements"]

SHARDING: dict[str, str] = {
    "runs": "cityHash64(run_id)",
    "events": "cityHash64(run_id, kind, key)",
    "gpu_samples": "cityHash64(run_id, node)",
    "node_profiles": "cityHash64(run_id, node)",
    "task_profiles": "cityHash64(run_id, pod)",
    "task_memory_peaks": "cityHash64(run_id, pod)",
    "signals": "cityHash64(run_id, fingerprint)",
    "actions": "cityHash64(run_id, id)",
    "pending_explanations": "cityHash64(run_id, pod)",
    "cluster_frag": "cityHash64(run_id)",
    "dead_letter": "cityHash64(target, id)",
    "run_writers": "cityHash64(run_id)",
    SCHEMA_TABLE: "version",
}
"""Table -> the Distributed table's sharding key: columns of its ORDER BY, without time."""

_CREATE_TABLE = re.compile(
    r"^CREATE TABLE IF NOT EXISTS (?P<name>\w+)\s*(?P<columns>\(.*\))\s*"
    r"ENGINE = ReplacingMergeTree(?:\((?P<version>\w+)\))?\s*(?P<rest>.*)$",
    re.DOTALL,
)
_ALTER_TABLE = re.compile(r"^ALTER TABLE (?P<name>\w+)\s+(?P<rest>.*)$", re.DOTALL)
_READS = re.compile(r"\b(FROM|JOIN)\s+(\w+)\b")
_CREATE_VIEW = re.compile(r"^CREATE VIEW IF NOT EXISTS (?P<name>\w+) AS\s+(?P<rest>.*)$", re.DOTALL)


def cluster_statements(
    migrations: Iterable[Migration], *, cluster: str, database: str
) -> list[str]:
    """Every statement that creates the history on ``cluster`` in ``database``, in order: the
    database, the migrations' tables and changes, and the record of each migration (so a
    gpufrag process that opens the store finds them applied and changes nothing)."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", cluster):
        raise StoreError(f"cluster name {cluster!r}: letters, digits and _ only")
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", database):
        raise StoreError(f"database name {database!r}: letters, digits and _ only")
    out = [f"CREATE DATABASE IF NOT EXISTS {database} ON CLUSTER {cluster}"]
    out += _rewrite(SCHEMA_DDL.strip(), cluster=cluster, database=database, origin="schema")
    records: list[str] = []
    for migration in migrations:
        for number, sql in enumerate(migration.statements(), start=1):
            where = f"{migration.name} statement {number}"
            out += _rewrite(sql, cluster=cluster, database=database, origin=where)
        records.append(f"({migration.version}, '{migration.name}', now64(3, 'UTC'))")
    if records:
        out.append(
            f"INSERT INTO {database}.{SCHEMA_TABLE} (version, name, applied_at) VALUES "
            + ", ".join(records)
        )
    return out


def _rewrite(sql: str, *, cluster: str, database: str, origin: str) -> list[str]:
    on = f"ON CLUSTER {cluster}"
    if m := _CREATE_TABLE.match(sql):
        name = m["name"]
        key = SHARDING.get(name)
        if key is None:
            raise StoreError(f"{origin}: no sharding key for table {name} (cluster_ddl.SHARDING)")
        local = f"{database}.{name}_local"
        zk_path = f"'/clickhouse/tables/{{shard}}/{database}/{name}_local'"
        args = ", ".join([zk_path, "'{replica}'", *([m["version"]] if m["version"] else [])])
        return [
            f"CREATE TABLE IF NOT EXISTS {local} {on}\n{m['columns']}\n"
            f"ENGINE = ReplicatedReplacingMergeTree({args})\n{m['rest']}",
            f"CREATE TABLE IF NOT EXISTS {database}.{name} {on} AS {local}\n"
            f"ENGINE = Distributed({cluster}, {database}, {name}_local, {key})",
        ]
    if m := _ALTER_TABLE.match(sql):
        name, rest = m["name"], m["rest"]
        return [
            f"ALTER TABLE {database}.{name}_local {on}\n{rest}",
            f"ALTER TABLE {database}.{name} {on}\n{rest}",
        ]
    if m := _CREATE_VIEW.match(sql):
        # the tables it reads named with their database: a view runs in the reader's
        reads = _READS.sub(lambda t: f"{t[1]} {database}.{t[2]}", m["rest"])
        return [f"CREATE VIEW IF NOT EXISTS {database}.{m['name']} {on} AS\n{reads}"]
    first = sql.splitlines()[0] if sql else ""
    raise StoreError(f"{origin}: no cluster form for a statement starting {first[:60]!r}")
