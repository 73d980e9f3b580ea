"""The read-only session on a server store: its limits travel with every request, and the
user's text is parsed by the local engine, never sent to the server as given.

No ClickHouse server runs here (Debian's is too old for clickhouse-connect), so the server's
client is a stand-in that records what it was built with and what it was asked."""

from __future__ import annotations

from typing import Any

import clickhouse_connect
import pytest

from connectors.clickhouse.read_only import open_read_only, session_settings
from connectors.clickhouse.store import open_store
from models.settings import SqlSettings, StoreSettings


class _ServerClient:
    """Records every statement it is sent."""

    database = ""

    def __init__(self, sent: list[str]) -> None:
        self._sent = sent

    def command(self, sql: str, parameters: object = None) -> None:
        self._sent.append(sql)

    def query(self, sql: str, parameters: object = None) -> Any:
        self._sent.append(sql)
        raise AssertionError("the stand-in server answers no query")

    def close(self) -> None:
        return None


def test_a_server_session_sends_its_limits_and_parses_locally(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made: list[dict[str, Any]] = []
    sent: list[str] = []
    real = clickhouse_connect.get_client

    def get_client(**kwargs: Any) -> Any:
        if str(kwargs.get("dsn", "")).startswith("chdb:"):
            return real(**kwargs)  # the local parser
        made.append(kwargs)
        return _ServerClient(sent)

    monkeypatch.setattr(clickhouse_connect, "get_client", get_client)
    limits = SqlSettings(max_result_rows=7)
    with (
        open_store(StoreSettings(dsn="http://reader:pw@127.0.0.1:8123/gf")) as store,
        open_read_only(store, limits) as session,
    ):
        tree = session.parse("SELECT $$'$$ AS s FROM runs")
        text = session.unparse(tree)
    session_made = made[-1]
    assert session_made["settings"] == session_settings(limits)
    assert session_made["settings"]["readonly"] == "1"
    assert session_made["settings"]["max_result_rows"] == "7"
    assert session_made["database"] == "gf" and session_made["username"] == "reader"
    assert text == "SELECT '\\'' AS s FROM runs"
    # only the store's own CREATE DATABASE reached the server: no text of the user's
    assert all("runs" not in s for s in sent), sent
