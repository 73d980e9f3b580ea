"""What the hostile and fuzzed `sql --query` tests watch: the store, files, sockets.

A store is "unchanged" when every table outside the engine's own databases has the same
name, row count and ``CREATE`` statement; a file is "created" when a path the queries name
exists afterwards; a socket is "opened" when a listener every network fragment points at
ever accepts a connection, or Python's audit hook sees a connect.
"""

from __future__ import annotations

import socket
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from connectors.clickhouse.read_only import ReadOnlySession, open_read_only
from connectors.clickhouse.store import Store
from models.settings import SqlSettings
from streams.app.lifecycle.history import open_history, store_settings

Snapshot = list[tuple[object, ...]]

ENGINE_DATABASES = ("system", "INFORMATION_SCHEMA", "information_schema")


def store_snapshot(store: Store) -> Snapshot:
    """Every table of every non-engine database: name, rows, CREATE statement."""
    res = store.query(
        "SELECT database, name, total_rows, create_table_query FROM system.tables "
        "WHERE database NOT IN {engine:Array(String)} ORDER BY database, name",
        {"engine": list(ENGINE_DATABASES)},
    )
    return list(res.rows)


def seed_rows(store: Store, *, runs: int = 40) -> None:
    """Runs with distinct ids, so that a write or a drop changes a count that is not zero."""
    store.command(
        "INSERT INTO runs (run_id, status, source, mode, policy, params, summary) "
        "SELECT concat('run-', toString(number)), 'finished', 'trace:x', 'fgd', 'fgd', '{}', "
        "'{}' FROM numbers({runs:UInt32})",
        {"runs": runs},
    )


@dataclass
class Listener:
    """A TCP listener on loopback that counts the connections it accepts."""

    port: int = 0
    accepted: int = 0
    _server: socket.socket = field(default_factory=socket.socket)

    def start(self) -> None:
        self._server.bind(("127.0.0.1", 0))
        self._server.listen(16)
        self._server.settimeout(0.2)
        self.port = self._server.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while self._server.fileno() >= 0:
            try:
                conn, _ = self._server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.accepted += 1
            conn.close()

    def stop(self) -> None:
        self._server.close()


@dataclass
class Watch:
    """Everything the queries of one test may not touch."""

    root: Path
    listener: Listener
    connects: list[object]

    @property
    def out(self) -> Path:
        """A file an INTO OUTFILE or file() write would create."""
        return self.root / "written.csv"

    @property
    def canary(self) -> Path:
        """A file whose text must never come back in a result."""
        return self.root / "canary.txt"

    def fill(self, text: str) -> str:
        return text.format(out=self.out, canary=self.canary, port=self.listener.port)

    def untouched(self) -> list[str]:
        """What was touched, in words: empty when nothing was."""
        touched = []
        if self.out.exists():
            touched.append(f"{self.out} was written")
        if self.listener.accepted:
            touched.append(f"the listener accepted {self.listener.accepted} connection(s)")
        if self.connects:
            touched.append(f"Python connected a socket to {self.connects}")
        return touched


@contextmanager
def watched(root: Path) -> Iterator[Watch]:
    listener = Listener()
    listener.start()
    connects: list[object] = []
    watching = [True]

    def hook(event: str, args: tuple[object, ...]) -> None:
        if watching[0] and event == "socket.connect":
            connects.append(args[1] if len(args) > 1 else args)

    sys.addaudithook(hook)  # audit hooks cannot be removed: this one is switched off instead
    watch = Watch(root=root, listener=listener, connects=connects)
    watch.canary.write_text("canary-7f3a secret text\n")
    try:
        yield watch
    finally:
        watching[0] = False
        listener.stop()


@contextmanager
def read_only_store(path: Path, limits: SqlSettings) -> Iterator[tuple[Store, ReadOnlySession]]:
    """A migrated store with a few rows, and a read-only session beside it."""
    store = open_history(store_settings(f"chdb://{path}"))
    try:
        seed_rows(store)
        with open_read_only(store, limits) as session:
            yield store, session
    finally:
        store.close()


Probe = tuple[Store, ReadOnlySession, Watch]


def probe_in(root: Path, limits: SqlSettings) -> Iterator[Probe]:
    """For a module's fixture: a seeded store, its read-only session, and the watch."""
    with read_only_store(root / "store", limits) as (store, session), watched(root) as watch:
        yield store, session, watch
