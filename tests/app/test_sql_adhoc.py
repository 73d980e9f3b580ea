"""`gpufrag sql --query` and `--schema`: a user's own SQL, read-only, as a user runs it.

The commands run as subprocesses on a real chDB store, as a user runs them; the hostile and
fuzzed queries go in-process through the same function (test_sql_hostile, test_sql_fuzz)."""

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

from models.settings import StoreSettings
from streams.app.lifecycle.history import open_history, store_settings
from streams.app.queries.adhoc_sql import TABLE_NOTES, bound_params
from streams.app.queries.named_queries import QueryError
from tests.app.pipeline_helpers import count, dsn_for, gpufrag, store_at
from tests.paths import REPO_ROOT

DEADLINE_S = 120.0


@pytest.fixture
def dsn(tmp_path: Path) -> str:
    """A migrated, empty store (as the first `gpufrag` command leaves one)."""
    made = dsn_for(tmp_path / "st")
    open_history(store_settings(made)).close()
    return made


def test_every_param_needs_a_server_side_placeholder() -> None:
    used = {"run", "n"}
    assert bound_params(used, {"run": "x", "n": "3"}) == {"run": "x", "n": "3"}
    # a value with no {name:Type} placeholder would be formatted into the text by the driver
    with pytest.raises(QueryError, match=r"--param m is not used by the query: write \{m:Type\}"):
        bound_params(used, {"run": "x", "n": "3", "m": "1"})
    with pytest.raises(QueryError, match=r"needs --param n=<value>"):
        bound_params(used, {"run": "x"})


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
        ("SHOW TABLES", "not SHOW"),
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


PROBE_FINDINGS = [
    # (finding, query, what the one-line refusal says)
    ("S1", "SELECT $$'$$; DROP TABLE runs; SELECT 'x'", "more than one statement"),
    ("S2", "SELECT 'x' AS x INTO OUTFILE '{out}' APPEND", "INTO OUTFILE"),
    ("S3", "SELECT file('/etc/passwd')", "function file() reads a file"),
    ("S4", "DESCRIBE url('http://127.0.0.1:9/x.csv')", "not DESCRIBE"),
    ("S5", "SELECT * FROM system.numbers", "system.numbers is not one of gpufrag's tables"),
]


@pytest.mark.parametrize(
    ("query", "says"), [(q, s) for _, q, s in PROBE_FINDINGS], ids=[f for f, _, _ in PROBE_FINDINGS]
)
def test_the_probes_queries_are_refused_and_the_store_still_works(
    dsn: str, tmp_path: Path, query: str, says: str
) -> None:
    written = tmp_path / "written.csv"
    out = gpufrag(dsn, "sql", "--query", query.replace("{out}", str(written)))
    assert out.returncode == 2, out.stdout + out.stderr
    assert out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], lines
    assert not written.exists()
    after = gpufrag(dsn, "sql", "--query", "SELECT count() AS n FROM runs", "--format", "csv")
    assert after.returncode == 0, after.stderr
    assert after.stdout.splitlines() == ["n", "0"]


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


def test_a_store_in_a_database_that_reads_files_by_name_is_not_queried(tmp_path: Path) -> None:
    """chDB's `default` database is an Overlay whose table names may be file names: a store
    made there (GPUFRAG_STORE__DATABASE=default) is refused before any query runs."""
    made = dsn_for(tmp_path / "st")
    open_history(StoreSettings(dsn=made, database="default")).close()
    hostname = Path("/etc/hostname")
    out = subprocess.run(
        [
            *(sys.executable, "-m", "streams.app", "sql", "--query"),
            f"SELECT * FROM `{hostname}`",
        ],
        capture_output=True,
        text=True,
        timeout=DEADLINE_S,
        check=False,
        env={**os.environ, "GPUFRAG_STORE__DSN": made, "GPUFRAG_STORE__DATABASE": "default"},
    )
    assert out.returncode == 2, out.stdout + out.stderr
    assert out.stdout == ""
    assert "the store's database default has the engine Overlay" in out.stderr
