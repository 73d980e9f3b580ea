"""`gpufrag sql --query` and `--schema`: a user's own SQL, read-only, as a user runs it.

The text check is tested in-process (it needs no store); the commands run as subprocesses on a
real chDB store; the readonly setting is tested by handing writes straight to the function that
runs a query with it, in a process of their own (a write chDB refused can leave that process's
session read-only, which must not leak into other tests)."""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from streams.app.adhoc_sql import TABLE_NOTES, bound_params, read_only_statement
from streams.app.history import open_history, store_settings
from streams.app.named_queries import QueryError
from tests.app.pipeline_helpers import count, dsn_for, gpufrag, store_at
from tests.paths import REPO_ROOT

DEADLINE_S = 120.0


@pytest.fixture
def dsn(tmp_path: Path) -> str:
    """A migrated, empty store (as the first `gpufrag` command leaves one)."""
    made = dsn_for(tmp_path / "st")
    open_history(store_settings(made)).close()
    return made


@pytest.mark.parametrize(
    ("text", "statement"),
    [
        ("SELECT 1", "SELECT 1"),
        ("  select count() FROM runs ;  ", "select count() FROM runs"),
        ("WITH 1 AS a SELECT a", "WITH 1 AS a SELECT a"),
        ("SHOW TABLES", "SHOW TABLES"),
        ("DESCRIBE runs", "DESCRIBE runs"),
        ("desc runs;", "desc runs"),
        (
            "-- a note; not a statement\nSELECT ';' AS s",
            "-- a note; not a statement\nSELECT ';' AS s",
        ),
        ("SELECT 1; -- done", "SELECT 1"),
        ("SELECT 1 /* ; DROP TABLE runs */", "SELECT 1 /* ; DROP TABLE runs */"),
        ("SELECT `a;b` FROM t", "SELECT `a;b` FROM t"),
    ],
)
def test_one_read_statement_passes_the_check(text: str, statement: str) -> None:
    assert read_only_statement(text) == statement


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("INSERT INTO runs (run_id) VALUES ('x')", "not INSERT"),
        ("ALTER TABLE runs DELETE WHERE 1", "not ALTER"),
        ("DROP TABLE runs", "not DROP"),
        ("SYSTEM STOP MERGES", "not SYSTEM"),
        ("/* hi */ create table t (x UInt8) ENGINE = Memory", "not CREATE"),
        ("WITH 1 AS a INSERT INTO runs (run_id) SELECT 'x'", "not an INSERT"),
        (
            "SELECT 1; DROP TABLE runs",
            "more than one statement (text after ';': 'DROP TABLE runs')",
        ),
        ("SELECT 1;;", "more than one statement"),
        ("SELECT 'it''s'; SELECT 2", "more than one statement"),
        ("", "--query is empty"),
        ("  -- only a comment", "--query is empty"),
    ],
)
def test_anything_else_is_refused_in_one_line(text: str, says: str) -> None:
    with pytest.raises(QueryError) as refused:
        read_only_statement(text)
    assert says in str(refused.value)
    assert "\n" not in str(refused.value)


def test_every_param_needs_a_server_side_placeholder() -> None:
    sql = "SELECT * FROM runs WHERE run_id = {run:String} LIMIT {n:UInt32}"
    assert bound_params(sql, {"run": "x", "n": "3"}) == {"run": "x", "n": "3"}
    # with no {name:Type} placeholder the driver would format the value into the text
    with pytest.raises(QueryError, match=r"--param n is not used by the query: write \{n:Type\}"):
        bound_params("SELECT %(n)s", {"n": "1"})
    with pytest.raises(QueryError, match=r"needs --param n=<value>"):
        bound_params(sql, {"run": "x"})


def test_query_binds_params_on_the_server_and_prints_json(dsn: str) -> None:
    out = gpufrag(
        dsn,
        "sql",
        "--query",
        "SELECT {n:UInt32} + 1 AS next, {s:String} AS s, count() AS runs FROM runs;",
        "--param",
        "n=41",
        "--param",
        "s=it's; DROP TABLE runs",
        "--format",
        "json",
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == [{"next": 42, "s": "it's; DROP TABLE runs", "runs": 0}]


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ("INSERT INTO runs (run_id) VALUES ('x')", "not INSERT"),
        ("SELECT 1; DROP TABLE runs", "more than one statement"),
    ],
)
def test_a_refused_query_is_one_line_and_exit_2(dsn: str, query: str, says: str) -> None:
    out = gpufrag(dsn, "sql", "--query", query)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpufrag: error: --query refused: ")
    assert says in lines[0]
    with store_at(dsn) as st:
        assert count(st, "runs") == 0
        assert "runs" in {r[0] for r in st.query("SHOW TABLES").rows}


_WRITE_PAST_THE_CHECK = textwrap.dedent(
    """
    import sys
    from connectors.clickhouse import StoreError
    from streams.app.adhoc_sql import run_read_only
    from streams.app.history import open_history, store_settings
    store = open_history(store_settings(sys.argv[1]))
    try:
        run_read_only(store, sys.argv[2])
    except StoreError as exc:
        print(exc.message)
        sys.exit(3)
    print("written")
    """
)


@pytest.mark.parametrize(
    "write",
    [
        "INSERT INTO runs (run_id) VALUES ('sneaked')",
        "CREATE TABLE sneaked (x UInt8) ENGINE = MergeTree ORDER BY x",
        "DROP TABLE runs",
        "INSERT INTO FUNCTION file('OUT', 'CSV', 'x UInt8') SELECT 1",
        # setting readonly back inside a subquery does not lift it
        "SELECT * FROM (SELECT * FROM file('/etc/hostname', 'LineAsString') SETTINGS readonly = 0)",
    ],
)
def test_the_readonly_setting_refuses_a_write_that_got_past_the_check(
    dsn: str, tmp_path: Path, write: str
) -> None:
    written = tmp_path / "written.csv"
    done = subprocess.run(
        [sys.executable, "-c", _WRITE_PAST_THE_CHECK, dsn, write.replace("OUT", str(written))],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=DEADLINE_S,
        check=False,
    )
    assert done.returncode == 3, done.stdout + done.stderr
    assert done.stdout.startswith("refused by ClickHouse's readonly setting")
    assert "(READONLY)" in done.stdout
    with store_at(dsn) as st:
        assert count(st, "runs") == 0
        assert "sneaked" not in {r[0] for r in st.query("SHOW TABLES").rows}
    assert not written.exists()


def test_schema_lists_every_table_with_what_it_holds(dsn: str) -> None:
    out = gpufrag(dsn, "sql", "--schema", "--format", "json")
    assert out.returncode == 0, out.stderr
    tables = {t["table"]: t for t in json.loads(out.stdout)}
    assert set(tables) == set(TABLE_NOTES)
    assert tables["runs"]["about"] == TABLE_NOTES["runs"]
    assert {"name": "status", "type": "LowCardinality(String)"} in tables["runs"]["columns"]
    assert tables["cluster_frag_1m"]["engine"] == "View"

    text = gpufrag(dsn, "sql", "--schema")
    assert text.returncode == 0, text.stderr
    assert f"runs (ReplacingMergeTree): {TABLE_NOTES['runs']}" in text.stdout.splitlines()
    assert "(no description)" not in text.stdout


_HOLD = textwrap.dedent(
    """
    import os
    import sys
    from connectors.clickhouse import open_store
    from models.settings import StoreSettings
    store = open_store(StoreSettings(dsn=os.environ["HOLD_DSN"]))
    print("holding", flush=True)
    sys.stdin.read()
    store.close()
    """
)


def _wait_for_line(proc: subprocess.Popen[str], expected: str) -> None:
    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + DEADLINE_S
        while True:
            left = deadline - time.monotonic()
            assert left > 0, f"the holder did not say {expected!r} in time"
            if sel.select(timeout=left):
                line = proc.stdout.readline()
                assert line, f"the holder ended early: {proc.communicate()[1]}"
                if line.strip() == expected:
                    return


def test_a_held_store_names_its_holder_and_how_to_read_meanwhile(dsn: str, tmp_path: Path) -> None:
    script = tmp_path / "hold_store.py"
    script.write_text(_HOLD)
    holder = subprocess.Popen(
        [sys.executable, str(script)],  # the store in the environment: a short command line
        cwd=REPO_ROOT,
        env={**os.environ, "HOLD_DSN": dsn},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for_line(holder, "holding")
        out = gpufrag(dsn, "sql", "--query", "SELECT count() FROM runs", timeout=DEADLINE_S)
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=DEADLINE_S)
    assert out.returncode == 2
    path = dsn.removeprefix("chdb://")
    assert out.stderr.splitlines() == [
        f"gpufrag: error: the store at {path} is in use by another gpufrag process "
        f"(pid {holder.pid}: {sys.executable} {script}); chDB lets one process open a "
        "store, so read it after that one stops, or while it runs through a ClickHouse server "
        "DSN (--store or GPUFRAG_STORE__DSN=http://...)"
    ]
    # once the holder is gone the same command reads
    after = gpufrag(dsn, "sql", "--query", "SELECT count() FROM runs", "--format", "csv")
    assert after.returncode == 0, after.stderr
    assert after.stdout.splitlines() == ["count()", "0"]
