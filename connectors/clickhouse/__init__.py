"""The ClickHouse history store: DSN, store handle, migrations, row converters and the sink.

chDB (ClickHouse's engine in-process) is the default store and a ClickHouse server the
alternative; both go through clickhouse-connect, so everything here works the same on either.
"""

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
