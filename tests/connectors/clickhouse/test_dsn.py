"""DSN parsing and the checks made before anything is opened."""

from __future__ import annotations

from pathlib import Path

import pytest

from connectors.clickhouse.dsn import (
    StoreError,
    default_spool_dir,
    default_store_dsn,
    ensure_store_dir,
    parse_dsn,
)


def test_default_dsn_is_under_xdg_data_home(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert default_store_dsn() == f"chdb://{tmp_path}/data/gpufrag/store"


def test_default_dsn_falls_back_to_local_share(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert default_store_dsn() == f"chdb://{tmp_path}/.local/share/gpufrag/store"
    # The default parses: the path need not exist yet.
    location = parse_dsn(default_store_dsn())
    assert location.kind == "chdb"
    assert location.path == tmp_path / ".local/share/gpufrag/store"


def test_chdb_dsn_gives_an_absolute_path_and_a_spool_beside_it(tmp_path: Path) -> None:
    location = parse_dsn(f"chdb://{tmp_path}/a/../store/")
    assert location.path == tmp_path / "store"
    assert location.describe() == f"chdb://{tmp_path}/store"
    assert default_spool_dir(location) == tmp_path / "store.spool"


@pytest.mark.parametrize("dsn", ["chdb://relative/store", "chdb://~/store", "chdb://"])
def test_chdb_path_must_be_absolute(dsn: str) -> None:
    with pytest.raises(StoreError, match="must be absolute: write chdb:///absolute/path"):
        parse_dsn(dsn)


def test_a_regular_file_is_not_a_store(tmp_path: Path) -> None:
    file = tmp_path / "history.db"
    file.write_text("not a store")
    with pytest.raises(StoreError) as info:
        parse_dsn(f"chdb://{file}")
    assert info.value.message == (
        f"{file} is not a usable store directory: it exists and is not a directory"
    )


@pytest.mark.parametrize(
    ("inside", "is_store"),
    [([], True), (["metadata/"], True), (["notes.txt"], False), (["photos/"], False)],
    ids=["empty", "a_store", "a_file", "a_folder"],
)
def test_a_folder_of_other_files_is_not_a_store(
    tmp_path: Path, inside: list[str], is_store: bool
) -> None:
    for name in inside:
        if name.endswith("/"):
            (tmp_path / name).mkdir()
        else:
            (tmp_path / name).write_text("mine")
    location = parse_dsn(f"chdb://{tmp_path}")
    if is_store:
        assert ensure_store_dir(location) == tmp_path
        return
    with pytest.raises(StoreError, match=r"holds other files and is not a chDB store"):
        ensure_store_dir(location)


def test_a_store_under_a_file_cannot_be_created(tmp_path: Path) -> None:
    file = tmp_path / "file"
    file.write_text("x")
    with pytest.raises(StoreError, match=rf"{tmp_path}/file/sub/store is not a usable store"):
        parse_dsn(f"chdb://{file}/sub/store")


@pytest.mark.parametrize("dsn", ["postgres://db/x", "/var/lib/store", "chdb:/x", "clickhouse://h"])
def test_unknown_forms_list_the_accepted_ones(dsn: str) -> None:
    with pytest.raises(StoreError) as info:
        parse_dsn(dsn)
    message = info.value.message
    assert message.startswith("unsupported store DSN")
    assert "chdb:///absolute/path" in message
    assert "http(s)://[user[:password]@]host[:port][/database]" in message


def test_server_dsn_with_credentials_port_and_database() -> None:
    location = parse_dsn("http://alice:s%40cret@db.example:9000/history")
    assert (location.kind, location.host, location.port) == ("http", "db.example", 9000)
    assert (location.user, location.password, location.database) == ("alice", "s@cret", "history")
    assert not location.secure
    # The password never reaches messages or logs.
    assert "s@cret" not in location.describe()
    assert "s@cret" not in repr(location)


def test_server_dsn_defaults() -> None:
    plain = parse_dsn("http://ch")
    assert (plain.port, plain.user, plain.password, plain.database) == (8123, "default", "", None)
    secure = parse_dsn("https://ch.example/")
    assert (secure.port, secure.secure, secure.database) == (8443, True, None)


@pytest.mark.parametrize(
    ("dsn", "match"),
    [
        ("http://h:notaport", "invalid port"),
        ("http://", "names no host"),
        ("http://h/bad-name", "invalid database name"),
        ("http://h?secure=1", "query or fragment"),
    ],
)
def test_bad_server_dsns(dsn: str, match: str) -> None:
    with pytest.raises(StoreError, match=match):
        parse_dsn(dsn)


def test_errors_never_show_a_password() -> None:
    with pytest.raises(StoreError) as info:
        parse_dsn("ftp://bob:hunter2@host/x")
    assert "hunter2" not in info.value.message


def test_store_error_is_one_line() -> None:
    error = StoreError("first\nsecond\n  Stack trace:\n0. frame")
    assert error.message == "first second"
