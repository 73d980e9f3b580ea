"""Opening the history store the way every command does: settings, DSN, migrations."""

from __future__ import annotations

from pathlib import Path

from connectors.clickhouse.dsn import StoreError, default_store_dsn, parse_dsn
from connectors.clickhouse.migrate import apply_migrations, default_sql_dir
from connectors.clickhouse.store import Store, open_store
from models import GpufragSettings, StoreSettings


def store_settings(dsn: str | None) -> StoreSettings:
    """``--store`` wins over GPUFRAG_STORE__DSN, which wins over the default chDB path."""
    base = GpufragSettings().store
    return base.model_copy(update={"dsn": dsn or base.dsn or default_store_dsn()})


def open_history(settings: StoreSettings) -> Store:
    """Open and bring the schema up to date (idempotent), so reading an empty store works."""
    store = open_store(settings)
    try:
        apply_migrations(store, default_sql_dir())
    except BaseException:
        store.close()
        raise
    return store


def open_history_to_read(settings: StoreSettings) -> Store:
    """For commands that only read: a chDB store that does not exist yet is an error, not a
    new empty store (a mistyped ``--store`` path would otherwise answer "no runs yet" and
    leave a store behind)."""
    location = parse_dsn(settings.dsn or default_store_dsn())
    if location.kind == "chdb":
        path = Path(str(location.path))
        if not path.is_dir() or not any(path.iterdir()):
            raise StoreError(
                f"no store at {path}: nothing was ever written there (check --store or "
                "GPUFRAG_STORE__DSN; `gpufrag replay` or `gpufrag watch` make one)"
            )
    return open_history(settings)
