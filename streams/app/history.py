"""Opening the history store the way every command does: settings, DSN, migrations."""

from __future__ import annotations

from connectors.clickhouse.dsn import default_store_dsn
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
