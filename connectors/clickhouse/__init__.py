"""The ClickHouse history store: DSN, store handle, migrations, row converters and the sink.

chDB (ClickHouse's engine in-process) is the default store and a ClickHouse server the
alternative; both go through clickhouse-connect, so everything here works the same on either.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from connectors.clickhouse.dsn import (
        StoreError,
        StoreLocation,
        default_spool_dir,
        default_store_dsn,
        parse_dsn,
    )
    from connectors.clickhouse.migrate import apply_migrations, default_sql_dir
    from connectors.clickhouse.sink import DEAD_LETTER_TABLE, ClickHouseSink
    from connectors.clickhouse.store import QueryResult, Store, open_store

_HOMES = {
    "StoreError": "dsn",
    "StoreLocation": "dsn",
    "default_spool_dir": "dsn",
    "default_store_dsn": "dsn",
    "parse_dsn": "dsn",
    "apply_migrations": "migrate",
    "default_sql_dir": "migrate",
    "DEAD_LETTER_TABLE": "sink",
    "ClickHouseSink": "sink",
    "QueryResult": "store",
    "Store": "store",
    "open_store": "store",
}
"""Each name's module, imported on first use: a submodule's importer (`gpufrag sql --list`
reads only the SQL folder's path) does not pay for clickhouse-connect and the models (about
0.35 s of a 0.6 s start) through this package's own import."""


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


__all__ = [
    "DEAD_LETTER_TABLE",
    "ClickHouseSink",
    "QueryResult",
    "Store",
    "StoreError",
    "StoreLocation",
    "apply_migrations",
    "default_spool_dir",
    "default_sql_dir",
    "default_store_dsn",
    "open_store",
    "parse_dsn",
]
