"""Opening the history store the way every command does: settings, DSN, migrations, and the
runs whose process died marked ``abandoned``."""

from __future__ import annotations

import sys
from pathlib import Path

from connectors.clickhouse.dsn import StoreError, default_store_dsn, parse_dsn
from connectors.clickhouse.migrate import apply_migrations, default_sql_dir
from connectors.clickhouse.store import Store, open_store
from models import GpufragSettings, StoreSettings
from streams.app.lifecycle.runs import abandon_orphaned_runs
from streams.app.lifecycle.settings_load import load_settings


def store_settings(dsn: str | None, *, loaded: GpufragSettings | None = None) -> StoreSettings:
    """``--store`` wins over GPUFRAG_STORE__DSN, which wins over the default chDB path.
    ``loaded``: the settings a command already read, so they are read once."""
    base = (loaded or load_settings()).store
    return base.model_copy(update={"dsn": dsn or base.dsn or default_store_dsn()})


def open_history(settings: StoreSettings) -> Store:
    """Open and bring the schema up to date (idempotent), so reading an empty store works.

    Every command opens the store here, so the first one after a process was killed finds
    its run still ``running`` and marks it ``abandoned`` (on a chDB store only: see
    :func:`abandon_orphaned_runs`), and says so, since nothing else will."""
    store = open_store(settings)
    try:
        apply_migrations(store, default_sql_dir())
        abandoned = abandon_orphaned_runs(store)
    except BaseException:
        store.close()
        raise
    for run_id in abandoned:
        print(
            f"gpufrag: run {run_id} was left running by a process that is gone; marked abandoned",
            file=sys.stderr,
        )
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
        if not (path / "metadata").is_dir():  # chDB makes it on the first open of a store
            raise StoreError(
                f"no store at {path}: the folder holds files but no chDB store (check --store "
                "or GPUFRAG_STORE__DSN)"
            )
    return open_history(settings)
