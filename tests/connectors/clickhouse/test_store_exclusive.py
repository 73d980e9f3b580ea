"""Store.exclusive: whether anything but this Store can be writing the store now, which is
what lets an open tell a run whose process died from a live one."""

from __future__ import annotations

from typing import Any

import clickhouse_connect
import pytest

from connectors.clickhouse import Store, open_store
from models.settings import StoreSettings


def test_a_chdb_store_is_exclusive_while_it_is_the_engines_only_user(
    store_settings: StoreSettings, store: Store
) -> None:
    # the engine's file lock keeps other processes out, and nothing else here has it open
    assert store.exclusive()
    second = open_store(store_settings)
    try:
        # another part of this process has it too: a run it writes may be live
        assert not store.exclusive()
        assert not second.exclusive()
    finally:
        second.close()
    assert store.exclusive()
    assert not second.exclusive()  # a closed Store speaks for nothing


class _FakeServerClient:
    """Enough of a clickhouse-connect client for open_store to bind a database."""

    database = ""

    def command(self, _sql: str, parameters: object = None) -> None:
        return None

    def close(self) -> None:
        return None


def test_a_server_store_is_never_exclusive(monkeypatch: pytest.MonkeyPatch) -> None:
    """Writers of a server store may be anywhere and no lock says whether they live."""

    def fake_client(**_kwargs: Any) -> _FakeServerClient:
        return _FakeServerClient()

    monkeypatch.setattr(clickhouse_connect, "get_client", fake_client)
    with open_store(StoreSettings(dsn="http://127.0.0.1:8123")) as server:
        assert server.location.kind == "http"
        assert not server.exclusive()
