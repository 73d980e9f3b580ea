"""The store handle against chDB: opening, binding, inserting, and the ways opening fails."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from datetime import UTC, datetime
from pathlib import Path

import pytest

from connectors.clickhouse import Store, StoreError, open_store
from models.settings import StoreSettings
from tests.paths import REPO_ROOT


def test_database_is_created_and_used_for_every_statement(tmp_path: Path) -> None:
    settings = StoreSettings(dsn=f"chdb://{tmp_path}/s", database="history_test")
    with open_store(settings) as store:
        assert store.query("SELECT currentDatabase()").rows == [("history_test",)]
        store.command("CREATE TABLE t (x UInt8) ENGINE = MergeTree ORDER BY x")
        store.insert("t", [{"x": 1}])
        tables = store.query(
            "SELECT database FROM system.tables WHERE name = {name:String}", {"name": "t"}
        )
        assert tables.rows == [("history_test",)]


def test_parameters_are_bound_by_the_server(store: Store) -> None:
    row = {
        "run_id": "r1",
        "started_at": datetime(2024, 1, 1, tzinfo=UTC),
        "updated_at": datetime(2024, 1, 1, 0, 5, tzinfo=UTC),
        "status": "finished",
        "source": "trace:x",
        "mode": "fgd",
        "policy": "fgd",
        "seed": 42,
        "params": "{}",
        "summary": "{}",
    }
    store.insert("runs", [row])
    sql = "SELECT run_id, seed FROM runs WHERE run_id = {run:String}"
    assert store.query(sql, {"run": "r1"}).rows == [("r1", 42)]
    # A value is data, never SQL: an injection attempt just matches nothing.
    assert store.query(sql, {"run": "r1' OR 1 = 1 --"}).rows == []


def test_datetime_nullable_map_and_low_cardinality_round_trip(store: Store) -> None:
    row = {
        "run_id": "r1",
        "ts": datetime(2024, 1, 2, 3, 4, 5, 678_000, tzinfo=UTC),
        "pod": "ml/gang:g1",
        "namespace": "ml",
        "queue": None,
        "gpu_count": 8,
        "gpu_milli": 1000,
        "mig": {"3g.40gb": 2},
        "gpu_memory_mib": 20_000,
        "gpu_cores_pct": None,
        "cpu_milli": 64_000,
        "memory_mib": 512_000,
        "fits_cluster_total": 1,
        "fits_some_node": 0,
        "unplaceable": 1,
        "reasons": {"Insufficient nvidia.com/gpu": 12, "node(s) had untolerated taint": 3},
        "near_misses": '["n1","n2"]',
        "nodes_checked": 15,
        "scheduler_at": datetime(2024, 1, 2, 3, 4, 1, 250_000, tzinfo=UTC),
        "scheduler_nodes": 15,
        "scheduler_reasons": {"taint": 3, "gpu_count": 12},
        "scheduler_message": None,
        "agrees": 1,
        "disagreement": "",
        "gang": "g1",
        "gang_min_member": 4,
        "gang_bound": 1,
        "gang_members": ["ml/w1", "ml/w2", "ml/w3"],
        "gang_placeable_together": 2,
        "gang_needed": 3,
        "gang_member_shown": "ml/w3",
    }
    single = {**row, "pod": "ml/p2", "queue": "q", "reasons": {}, "gang_members": []}
    store.insert("pending_explanations", [row, single])
    got = store.query("SELECT * FROM pending_explanations ORDER BY pod").dicts()
    assert {k: got[0][k] for k in row} == row
    # columns added since (migration 016, the quota blocker) read back as NULL
    assert all(got[0][k] is None for k in set(got[0]) - set(row))
    assert got[0]["ts"].tzinfo is not None  # aware UTC back, like the models
    assert got[1]["queue"] == "q" and got[1]["reasons"] == {}


def test_insert_refuses_rows_whose_columns_differ(store: Store) -> None:
    with pytest.raises(StoreError, match=r"row 1 has other columns .*extra \['y'\]"):
        store.insert("dead_letter", [{"id": "a"}, {"id": "b", "y": 1}])


def test_a_driver_failure_is_one_line(store: Store) -> None:
    with pytest.raises(StoreError) as info:
        store.query("SELECT * FROM no_such_table")
    assert "UNKNOWN_TABLE" in info.value.message
    assert "\n" not in info.value.message


def test_opening_the_same_path_twice_in_one_process_shares_the_engine(
    store_settings: StoreSettings, store: Store
) -> None:
    other = open_store(store_settings)
    other.command("CREATE TABLE shared_t (x UInt8) ENGINE = Memory")
    other.close()
    # Closing one Store leaves the other (and the engine) open.
    assert store.query("EXISTS TABLE shared_t").rows == [(1,)]
    with pytest.raises(StoreError, match="is closed"):
        other.query("SELECT 1")


def test_a_second_path_in_the_same_process_is_refused_while_one_is_open(
    store: Store, tmp_path: Path
) -> None:
    with pytest.raises(StoreError, match=r"this process already has the store at .* open"):
        open_store(StoreSettings(dsn=f"chdb://{tmp_path}/other"))


def test_a_regular_file_as_store_gives_a_store_error(tmp_path: Path) -> None:
    file = tmp_path / "store"
    file.write_text("oops")
    with pytest.raises(StoreError, match="is not a usable store directory"):
        open_store(StoreSettings(dsn=f"chdb://{file}"))


def test_a_damaged_store_gives_the_engines_reason_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "store"
    (path / "metadata").mkdir(parents=True)
    (path / "metadata" / "gpufrag.sql").write_text("this is not sql")
    with pytest.raises(StoreError) as info:
        open_store(StoreSettings(dsn=f"chdb://{path}"))
    message = info.value.message
    assert message.startswith(f"cannot open the store at {path}: ")
    assert "Syntax error (in file metadata/gpufrag.sql)" in message
    assert "move it aside" in message


def test_an_unreachable_server_gives_one_line_without_the_password() -> None:
    # Port 1 refuses connections: the server form fails fast with the address in the line.
    with pytest.raises(StoreError) as info:
        open_store(StoreSettings(dsn="http://alice:hunter2@127.0.0.1:1/history"))
    message = info.value.message
    assert message.startswith("cannot reach the store at http://alice@127.0.0.1:1/history: ")
    assert "hunter2" not in message


def test_invalid_database_name_is_refused(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="invalid database name 'x; DROP'"):
        open_store(StoreSettings(dsn=f"chdb://{tmp_path}/s", database="x; DROP"))


def test_a_second_process_gets_the_in_use_message(
    store_settings: StoreSettings, store: Store
) -> None:
    script = textwrap.dedent(
        f"""
        import sys
        from connectors.clickhouse import StoreError, open_store
        from models.settings import StoreSettings
        try:
            open_store(StoreSettings(dsn={store_settings.dsn!r}))
        except StoreError as exc:
            print(exc.message)
            sys.exit(2)
        sys.exit(0)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    line = done.stdout.strip()
    path = store_settings.dsn.removeprefix("chdb://")  # type: ignore[union-attr]
    assert line.startswith(f"the store at {path} is in use by another gpufrag process (pid ")
    assert line.endswith(
        "read it after that one stops, or while it runs through a ClickHouse server DSN "
        "(--store or GPUFRAG_STORE__DSN=http://...)"
    )
    assert "Traceback" not in done.stderr
    # The holder is unaffected.
    assert store.query("SELECT 1").rows == [(1,)]
