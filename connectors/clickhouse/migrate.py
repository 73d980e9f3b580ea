"""Numbered DDL migrations, applied once each, in order, at start.

Files are ``NNN_name.sql`` in ``sql/migrations``; a file may hold several statements, each
ending with ``;`` at the end of a line, and lines starting with ``--`` are comments. What was
applied is recorded in ``schema_migrations``, so starting twice applies nothing the second
time; the statements themselves use ``IF NOT EXISTS`` as well, so two processes migrating the
same server at once, or a crash between a statement and its record, are harmless.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from connectors.clickhouse.dsn import StoreError

if TYPE_CHECKING:  # a type only: finding the SQL folder needs no client library
    from connectors.clickhouse.store import Store

__all__ = [
    "SCHEMA_DDL",
    "SCHEMA_TABLE",
    "Migration",
    "apply_migrations",
    "default_sql_dir",
    "load_migrations",
    "split_statements",
]

SCHEMA_TABLE = "schema_migrations"

SCHEMA_DDL = f"""
CREATE TABLE IF NOT EXISTS {SCHEMA_TABLE}
(
    version     UInt32,
    name        String,
    applied_at  DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree
ORDER BY version
"""

_FILE_NAME = re.compile(r"^(\d+)_([A-Za-z0-9_]+)\.sql$")
_STATEMENT_END = re.compile(r";[ \t]*$", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    """The file name, e.g. ``003_gpu_samples.sql``."""
    path: Path

    def statements(self) -> list[str]:
        return split_statements(self.path.read_text(encoding="utf-8"))


def default_sql_dir() -> Path:
    """``sql/migrations`` beside this package's top: the checkout's in development mode, and the
    copy a wheel installs into site-packages (pyproject ships sql/ as package data)."""
    path = Path(__file__).resolve().parents[2] / "sql" / "migrations"
    if not path.is_dir():
        raise StoreError(
            f"the SQL migrations folder {path} is missing: the installation lacks sql/ "
            "(reinstall gpufrag, or run it from its source checkout)"
        )
    return path


def split_statements(text: str) -> list[str]:
    """Statements of one migration file: comment lines dropped, split at ``;`` ending a line."""
    kept = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--"))
    return [part.strip() for part in _STATEMENT_END.split(kept) if part.strip()]


def load_migrations(sql_dir: Path) -> list[Migration]:
    """The migration files of ``sql_dir`` in version order; a misnamed ``.sql`` file or a
    version used twice is an error rather than a file silently skipped."""
    if not sql_dir.is_dir():
        raise StoreError(f"the SQL migrations folder {sql_dir} is missing or not a folder")
    found: dict[int, Migration] = {}
    for path in sorted(sql_dir.glob("*.sql")):
        match = _FILE_NAME.match(path.name)
        if match is None:
            raise StoreError(f"migration file {path} must be named NNN_name.sql")
        version = int(match.group(1))
        if version in found:
            raise StoreError(
                f"migrations {found[version].name} and {path.name} share version {version}"
            )
        found[version] = Migration(version=version, name=path.name, path=path)
    return [found[v] for v in sorted(found)]


def apply_migrations(store: Store, sql_dir: Path) -> list[str]:
    """Apply every migration in ``sql_dir`` not yet recorded; returns the names applied now.

    A migration already recorded under another file name means the files were renumbered or
    renamed after being applied, which would silently skip a change: that is an error."""
    migrations = load_migrations(sql_dir)
    try:
        store.command(SCHEMA_DDL)
        rows = store.query(f"SELECT version, name FROM {SCHEMA_TABLE} FINAL").rows
    except StoreError as exc:
        raise StoreError(f"cannot read the applied migrations: {exc.message}") from exc
    applied: dict[int, str] = {int(v): str(n) for v, n in rows}
    done: list[str] = []
    for migration in migrations:
        recorded = applied.get(migration.version)
        if recorded is not None:
            if recorded != migration.name:
                raise StoreError(
                    f"migration {migration.version} was applied as {recorded} but the file is "
                    f"now {migration.name}; add a new numbered file instead of editing one"
                )
            continue
        _apply_one(store, migration)
        done.append(migration.name)
    return done


def _apply_one(store: Store, migration: Migration) -> None:
    statements = migration.statements()
    if not statements:
        raise StoreError(f"migration {migration.name} holds no statement")
    for number, sql in enumerate(statements, start=1):
        try:
            store.command(sql)
        except StoreError as exc:
            raise StoreError(
                f"migration {migration.name} failed at statement {number}: {exc.message}"
            ) from exc
    store.insert(
        SCHEMA_TABLE,
        [
            {
                "version": migration.version,
                "name": migration.name,
                "applied_at": datetime.now(UTC),
            }
        ],
    )
