"""Where the history store lives: one DSN, parsed and checked before anything is opened.

Two forms are accepted, so the same code runs embedded (the default: ClickHouse's engine
in-process through chDB, nothing to install or start) and against a server:

- ``chdb:///absolute/path``: a store directory on this machine;
- ``http(s)://[user[:password]@]host[:port][/database]``: a ClickHouse server.

Every problem is reported as a :class:`StoreError` whose message is one line a user can act on:
the command line prints it and exits non-zero instead of showing a traceback.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal
from urllib.parse import unquote, urlsplit

__all__ = [
    "ACCEPTED_FORMS",
    "StoreError",
    "StoreKind",
    "StoreLocation",
    "check_identifier",
    "check_store_dir",
    "default_spool_dir",
    "default_store_dsn",
    "ensure_store_dir",
    "parse_dsn",
    "user_data_dir",
]

StoreKind = Literal["chdb", "http", "https"]

ACCEPTED_FORMS = (
    "chdb:///absolute/path (the embedded store, the default) or "
    "http(s)://[user[:password]@]host[:port][/database] (a ClickHouse server)"
)

_DEFAULT_PORTS: dict[str, int] = {"http": 8123, "https": 8443}
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class StoreError(RuntimeError):
    """A store problem told as one line: what is wrong and what to do about it.

    Newlines are folded so that an engine message (which may span lines or carry a stack
    trace) can never turn the user's one clear line into a wall of text."""

    def __init__(self, message: str) -> None:
        super().__init__(one_line(message))

    @property
    def message(self) -> str:
        """The user-facing line."""
        return str(self.args[0])


def one_line(text: str, *, limit: int = 600) -> str:
    """First part of an engine or driver message, folded to one line: ClickHouse appends stack
    traces and chDB embeds its own, which help nobody reading a CLI error or a dead letter."""
    cut = text.find("Stack trace")
    if cut > 0:
        text = text[:cut]
    folded = " ".join(text.split()).rstrip(" ,")
    return folded if len(folded) <= limit else folded[: limit - 3] + "..."


@dataclass(frozen=True, slots=True)
class StoreLocation:
    """A parsed DSN: a chDB directory, or a server's address and credentials."""

    kind: StoreKind
    path: Path | None = None
    host: str | None = None
    port: int | None = None
    user: str = "default"
    password: str = field(default="", repr=False)
    """Kept out of repr and describe() so it never reaches a log line or an error message."""
    database: str | None = None
    """Database named in a server DSN's path; when None the settings' database is used."""

    @property
    def secure(self) -> bool:
        return self.kind == "https"

    def describe(self) -> str:
        """The DSN without the password, for messages."""
        if self.kind == "chdb":
            return f"chdb://{self.path}"
        db = f"/{self.database}" if self.database else ""
        return f"{self.kind}://{self.user}@{self.host}:{self.port}{db}"


def user_data_dir() -> Path:
    """``$XDG_DATA_HOME/gpufrag``, else ``~/.local/share/gpufrag`` (the XDG default)."""
    xdg = os.environ.get("XDG_DATA_HOME", "")
    # The XDG spec says a relative value is invalid and must be ignored.
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".local" / "share"
    return base / "gpufrag"


def default_store_dsn() -> str:
    """The embedded store under the user's data directory: history survives restarts without
    any configuration."""
    return f"chdb://{user_data_dir() / 'store'}"


def default_spool_dir(location: StoreLocation) -> Path:
    """Where a sink keeps rows it could not write before stopping: beside a chDB store (so it
    moves with it), or per server under the user's data directory."""
    if location.kind == "chdb":
        assert location.path is not None
        return location.path.with_name(location.path.name + ".spool")
    db = location.database or "_"
    return user_data_dir() / "spool" / f"{location.kind}_{location.host}_{location.port}_{db}"


def check_identifier(name: str, what: str = "database") -> str:
    """Names that go into DDL unquoted must be plain identifiers: no quoting games, no
    injection through a setting."""
    if not _IDENTIFIER.match(name):
        raise StoreError(
            f"invalid {what} name {name!r}: use letters, digits and underscores, "
            "not starting with a digit"
        )
    return name


def parse_dsn(dsn: str) -> StoreLocation:
    """Parse and check a DSN without opening or creating anything.

    A chDB path is checked against the file system (it must be absolute, must not be a
    regular file, and must be creatable), so a typo fails here with the path in the message
    rather than deep inside the engine."""
    text = dsn.strip()
    scheme, sep, _ = text.partition("://")
    scheme = scheme.lower()
    if not sep or scheme not in ("chdb", "http", "https"):
        raise StoreError(f"unsupported store DSN {_redact(text)!r}: use {ACCEPTED_FORMS}")
    parts = urlsplit(text)
    if parts.query or parts.fragment:
        raise StoreError(
            f"store DSN {_redact(text)!r} has a query or fragment, which gpufrag does not read: "
            f"use {ACCEPTED_FORMS}"
        )
    if scheme == "chdb":
        return _parse_chdb(text, parts.netloc, unquote(parts.path))
    return _parse_server(text, scheme)


def _parse_chdb(text: str, netloc: str, raw_path: str) -> StoreLocation:
    if netloc or not raw_path.startswith("/"):
        shown = f"{netloc}{raw_path}"
        raise StoreError(
            f"store path {shown!r} in {text!r} must be absolute: write chdb:///absolute/path "
            "(three slashes)"
        )
    path = Path(os.path.normpath(raw_path))
    _check_store_dir(path)
    return StoreLocation(kind="chdb", path=path)


STORE_MARKER = "metadata"
"""The folder chDB's engine writes into every store it opens (beside data/, store/, tmp/):
what tells a store from any other folder."""


def _check_store_dir(path: Path) -> None:
    def unusable(why: str) -> StoreError:
        return StoreError(f"{path} is not a usable store directory: {why}")

    if path.exists():
        if not path.is_dir():
            raise unusable("it exists and is not a directory")
        if not os.access(path, os.R_OK | os.W_OK | os.X_OK):
            raise unusable("no permission to read and write it")
        return
    ancestor = path.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise unusable(f"{ancestor} is not a directory, so it cannot be created")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise unusable(f"no permission to create it in {ancestor}")


def check_store_dir(location: StoreLocation) -> Path:
    """A chDB store's directory that :func:`ensure_store_dir` would accept, checked without
    creating anything (`gpufrag check-config`): parse_dsn checked that it can be written or
    created; an existing folder must also be empty or a store already."""
    assert location.kind == "chdb" and location.path is not None
    path = location.path
    if path.is_dir() and not (path / STORE_MARKER).is_dir() and any(path.iterdir()):
        # The engine would write its folders among someone else's files, and a later
        # clean-up of the store would take those files with it.
        raise StoreError(
            f"{path} holds other files and is not a chDB store (no {STORE_MARKER}/ "
            "folder): give a new or empty folder, or an existing store"
        )
    return path


def ensure_store_dir(location: StoreLocation) -> Path:
    """Create a chDB store's directory (and parents); the engine creates its own layout inside.
    An existing folder must be empty or a store already."""
    check_store_dir(location)
    assert location.path is not None
    try:
        location.path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(
            f"{location.path} is not a usable store directory: {exc.strerror or exc}"
        ) from exc
    return location.path


def _parse_server(text: str, scheme: str) -> StoreLocation:
    parts = urlsplit(text)
    try:
        port = parts.port
    except ValueError as exc:
        raise StoreError(f"store DSN {_redact(text)!r} has an invalid port: {exc}") from exc
    if not parts.hostname:
        raise StoreError(f"store DSN {_redact(text)!r} names no host: use {ACCEPTED_FORMS}")
    database = unquote(parts.path).strip("/") or None
    if database is not None:
        check_identifier(database)
    return StoreLocation(
        kind="http" if scheme == "http" else "https",
        host=parts.hostname,
        port=port if port is not None else _DEFAULT_PORTS[scheme],
        user=unquote(parts.username) if parts.username else "default",
        password=unquote(parts.password) if parts.password else "",
        database=database,
    )


def _redact(text: str) -> str:
    """A DSN fit for an error message: any password replaced."""
    return re.sub(r"(://[^/@:]*:)[^/@]*@", r"\1***@", text)
