"""Small queries shared by the store tests."""

from __future__ import annotations

from connectors.clickhouse import Store


def count(store: Store, table: str, *, final: bool = False) -> int:
    suffix = " FINAL" if final else ""
    return int(store.query(f"SELECT count() FROM {table}{suffix}").rows[0][0])
