"""`gpufrag migrate` on a chDB store, as a subprocess: every migration the first time, none
the second, and the tables there afterwards."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from connectors.clickhouse.migrate import default_sql_dir, load_migrations
from tests.app.pipeline_helpers import store_at
from tests.app.watch_helpers import clean_env

pytestmark = pytest.mark.deploy


def _migrate(dsn: str) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-m", "streams.app", "migrate", "--store", dsn],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


def test_migrate_applies_each_migration_once_and_says_so(tmp_path: Path) -> None:
    dsn = f"chdb://{tmp_path / 'store'}"
    names = [m.name for m in load_migrations(default_sql_dir())]
    first = _migrate(dsn)
    assert first[:-1] == [f"applied {name}" for name in names]
    assert first[-1] == f"{dsn}: {len(names)} migrations applied; the schema is at {names[-1]}"
    second = _migrate(dsn)
    assert second == [f"{dsn}: nothing to apply; the schema is already at {names[-1]}"]
    with store_at(dsn) as store:
        tables = {row[0] for row in store.query("SHOW TABLES").rows}
    assert _created() | {"schema_migrations"} <= tables


def _created() -> set[str]:
    """The tables and views the migration files create."""
    made = re.compile(r"CREATE (?:TABLE|VIEW) IF NOT EXISTS (\w+)")
    found = {m for path in default_sql_dir().glob("*.sql") for m in made.findall(path.read_text())}
    assert len(found) >= 11  # 10 tables and a view when this was written
    return found
