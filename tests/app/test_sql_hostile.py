"""`gpufrag sql --query` against hostile queries: each refused with its reason, nothing touched.

The probe's findings S1-S5 first, then every way we know to reach past the store: table
functions, file and network functions, output clauses, settings, multi-statements hidden by
comments and ClickHouse's quoting forms, writes inside UNION, CTEs and subqueries. After each
query the store has the same tables, rows and CREATE statements, no file was written, and no
socket opened (a listener the network fragments point at, and Python's audit hook)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from connectors.clickhouse.dsn import StoreError
from connectors.clickhouse.read_only import ReadOnlySession
from models.settings import SqlSettings
from streams.app.queries.adhoc_sql import run_adhoc
from streams.app.queries.named_queries import QueryError
from tests.app.sql_probe import Probe, Snapshot, probe_in, store_snapshot

LIMITS = SqlSettings()
MULTI = "more than one statement"
OUTFILE = "INTO OUTFILE"
SETTINGS = "a SETTINGS clause"
NOT_OURS = "is not one of gpufrag's tables"
URL = "url('http://127.0.0.1:{port}/x.csv', CSV, 'a String')"

HOSTILE: list[tuple[str, str, str]] = [
    # S1: $$ strings hid the ';' from the old text check, and SETTINGS went to the last one
    ("S1-drop", "SELECT $$'$$; DROP TABLE runs; SELECT 'x'", MULTI),
    ("S1-create", "SELECT $$'$$; CREATE TABLE pwn (x UInt8) ENGINE = Memory; SELECT 'x'", MULTI),
    (
        "S1-file-write",
        "SELECT $$'$$; INSERT INTO FUNCTION file('{out}', 'CSV', 'x UInt8') SELECT 1; SELECT 1",
        MULTI,
    ),
    ("S1-url", "SELECT $$'$$; SELECT * FROM " + URL + "; SELECT 'x'", MULTI),
    ("tagged-dollar", "SELECT $tag$;$tag$; DROP TABLE runs", MULTI),
    # S2: output clauses
    ("S2-append", "SELECT 'x' AS x INTO OUTFILE '{out}' APPEND", OUTFILE),
    ("S2-truncate", "SELECT 'x' AS x INTO OUTFILE '{out}' TRUNCATE", OUTFILE),
    ("outfile-stdout", "SELECT 1 INTO OUTFILE '{out}' AND STDOUT", OUTFILE),
    ("outfile-gzip", "SELECT 1 INTO OUTFILE '{out}' COMPRESSION 'gzip'", OUTFILE),
    ("format", "SELECT 1 FORMAT TabSeparated", "a FORMAT clause"),
    # S3: file() as a plain function, however spelled
    ("S3-file", "SELECT file('{canary}')", "function file() reads a file"),
    ("S3-FILE", "SELECT FILE('{canary}')", "function FILE() reads a file"),
    ("file-apply", "SELECT * APPLY(file) FROM runs", "function file() reads a file"),
    ("file-lambda", "SELECT arrayMap(x -> file(x), ['{canary}'])", "function file()"),
    # S4: DESCRIBE of table functions
    ("S4-url", "DESCRIBE " + URL, "not DESCRIBE"),
    ("S4-remote", "DESCRIBE remote('127.0.0.1:{port}', system.one)", "not DESCRIBE"),
    ("S4-file", "DESC TABLE file('{canary}')", "not DESCRIBE"),
    # S5: unbounded system tables
    ("S5-numbers", "SELECT * FROM system.numbers", "system.numbers " + NOT_OURS),
    ("S5-numbers-mt", "SELECT count() FROM system.numbers_mt", NOT_OURS),
    ("system-in", "SELECT run_id FROM runs WHERE run_id IN system.tables", NOT_OURS),
    (
        "system-join",
        "SELECT * FROM runs AS r JOIN system.users AS u ON r.run_id = u.name",
        NOT_OURS,
    ),
    ("other-db", "SELECT * FROM INFORMATION_SCHEMA.TABLES", NOT_OURS),
    # a table's own alias is no licence: in chDB's `default` database a name is a file
    ("alias-as-table", "SELECT * FROM `{canary}` AS `{canary}`", NOT_OURS),
    ("alias-in", "SELECT 1 AS `{canary}` FROM runs WHERE 1 IN `{canary}`", NOT_OURS),
    ("param-table", "SELECT * FROM {{t:Identifier}}", "a table cannot be a query parameter"),
    ("scalar-system", "SELECT (SELECT max(bytes) FROM system.parts)", NOT_OURS),
    # table functions (every one is refused: see the test below)
    ("tf-file", "SELECT * FROM file('{canary}', 'LineAsString')", "table function file()"),
    ("tf-url", "SELECT * FROM " + URL, "table function url()"),
    ("tf-remote", "SELECT * FROM remote('127.0.0.1:{port}', system.one)", "table function"),
    ("tf-numbers", "SELECT * FROM numbers(1000000000000)", "table function numbers()"),
    ("tf-executable", "SELECT * FROM executable('id', 'CSV', 'x String')", "table function"),
    # comments and quoting around a second statement
    ("block-comment", "SELECT 1 /* ; */; DROP TABLE runs", MULTI),
    ("line-comment", "SELECT 1 -- ;\n; DROP TABLE runs", MULTI),
    ("hash-comment", "SELECT 1 # x\n; DROP TABLE runs", MULTI),
    ("backslash-quote", "SELECT '\\\\'; DROP TABLE runs; --'", MULTI),
    ("double-quoted", 'SELECT "a;b" FROM runs; DROP TABLE runs', MULTI),
    ("backquoted", "SELECT `x`; DROP TABLE runs", MULTI),
    ("two-selects", "SELECT 1; SELECT 2", MULTI),
    ("empty-second", "SELECT 1;\n;\nDROP TABLE runs", MULTI),
    # UNION, CTEs and subqueries that carry a side effect
    ("union-file", "SELECT 'a' UNION ALL SELECT * FROM file('{canary}', 'LineAsString')", "file()"),
    (
        "union-system",
        "SELECT run_id FROM runs UNION DISTINCT SELECT name FROM system.tables",
        NOT_OURS,
    ),
    ("intersect", "SELECT 1 INTERSECT SELECT number FROM system.numbers", NOT_OURS),
    ("cte-url", "WITH x AS (SELECT * FROM " + URL + ") SELECT * FROM x", "table function url()"),
    ("cte-scalar-file", "WITH (SELECT file('{canary}')) AS f SELECT f", "function file()"),
    ("cte-insert", "WITH 1 AS a INSERT INTO runs (run_id) SELECT 'x'", "not INSERT"),
    ("in-subquery-url", "SELECT 1 FROM runs WHERE 1 IN (SELECT 1 FROM " + URL + ")", "url()"),
    # settings, however placed
    ("settings", "SELECT 1 SETTINGS readonly = 0", SETTINGS),
    ("inner-settings", "SELECT * FROM (SELECT 1 SETTINGS max_result_rows = 0)", SETTINGS),
    ("set", "SET readonly = 0", "not SET"),
    # functions that reach past the rows
    ("dictionary", "SELECT dictGet('d', 'x', toUInt64(1))", "reads a dictionary"),
    ("join-get", "SELECT joinGet('runs', 'status', 'x')", "reads another table"),
    (
        "column-probe",
        "SELECT hasColumnInTable('127.0.0.1:{port}', 'system', 'one', 'dummy')",
        "another",
    ),
    ("disks", "SELECT filesystemAvailable()", "reads the host's disks"),
    ("introspection", "SELECT addressToLine(toUInt64(1))", "reads the engine's own memory"),
    ("sleep", "SELECT sleepEachRow(1) FROM runs", "waits instead of reading"),
    ("serial-id", "SELECT generateSerialID('x')", "writes a counter"),
    ("host", "SELECT hostName()", "reads the server's host"),
    ("unknown-function", "SELECT serverOnlyIo('x')", "is not a function of the bundled"),
    # what the parser takes but cannot be run or printed back: one line, not a traceback
    ("past-uint64", "SELECT 18446744073709551616", "cannot be run as parsed"),
    ("ties-unordered", "SELECT run_id FROM runs LIMIT 5 WITH TIES", "cannot be parsed"),
    # writes and administration
    ("insert", "INSERT INTO runs (run_id) VALUES ('x')", "not INSERT"),
    ("insert-file", "INSERT INTO FUNCTION file('{out}', 'CSV', 'x UInt8') SELECT 1", "not INSERT"),
    ("insert-select", "INSERT INTO runs SELECT * FROM runs", "not INSERT"),
    ("create", "CREATE TABLE pwn (x UInt8) ENGINE = Memory", "not CREATE"),
    ("drop", "DROP TABLE runs", "not DROP"),
    ("truncate", "TRUNCATE TABLE runs", "not DROP or TRUNCATE"),
    ("alter", "ALTER TABLE runs DELETE WHERE 1", "not ALTER"),
    ("rename", "RENAME TABLE runs TO r2", "not RENAME"),
    ("optimize", "OPTIMIZE TABLE runs FINAL", "not OPTIMIZE"),
    ("system", "SYSTEM DROP DNS CACHE", "not SYSTEM"),
    ("detach", "DETACH TABLE runs", "not DROP"),
    ("kill", "KILL QUERY WHERE 1", "not KILL QUERY"),
    ("use", "USE system", "not USE"),
    ("explain", "EXPLAIN SELECT 1", "not EXPLAIN"),
    ("show", "SHOW TABLES", "not SHOW"),
]


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Probe]:
    yield from probe_in(tmp_path_factory.mktemp("hostile"), LIMITS)


@pytest.fixture(scope="module")
def before(probe: Probe) -> Snapshot:
    return store_snapshot(probe[0])


def refusal(session: ReadOnlySession, text: str) -> str:
    with pytest.raises((QueryError, StoreError)) as refused:
        run_adhoc(session, text, {}, limits=LIMITS)
    return str(refused.value)


def test_the_table_is_long_enough() -> None:
    assert len(HOSTILE) >= 40
    assert len({name for name, _, _ in HOSTILE}) == len(HOSTILE)


@pytest.mark.parametrize(
    ("text", "says"), [(t, s) for _, t, s in HOSTILE], ids=[n for n, _, _ in HOSTILE]
)
def test_a_hostile_query_is_refused_with_its_reason_and_touches_nothing(
    probe: Probe, before: Snapshot, text: str, says: str
) -> None:
    store, session, watch = probe
    said = refusal(session, watch.fill(text))
    assert says in said
    assert "\n" not in said
    assert "canary-7f3a" not in said
    assert store_snapshot(store) == before
    assert watch.untouched() == []


def test_every_table_function_the_engine_has_is_refused(probe: Probe, before: Snapshot) -> None:
    store, session, watch = probe
    names = [r[0] for r in store.query("SELECT name FROM system.table_functions").rows]
    assert len(names) > 30
    # view() and viewIfPermitted() take a query, not a value
    forms = ("'{canary}'", "SELECT 1", "SELECT 1 ELSE null('x UInt8')")
    for name in names:
        said = [refusal(session, f"SELECT * FROM {name}({watch.fill(f)})") for f in forms]
        assert any(f"table function {name}()" in s for s in said), said
    assert store_snapshot(store) == before
    assert watch.untouched() == []


def test_the_session_itself_refuses_writes_and_setting_changes(
    probe: Probe, before: Snapshot
) -> None:
    """The second guard: statements handed to the session past the tree check."""
    store, session, watch = probe
    for write in (
        "INSERT INTO runs (run_id) VALUES ('sneaked')",
        "CREATE TABLE sneaked (x UInt8) ENGINE = MergeTree ORDER BY x",
        "DROP TABLE runs",
        watch.fill("INSERT INTO FUNCTION file('{out}', 'CSV', 'x UInt8') SELECT 1"),
        "SELECT 1 SETTINGS readonly = 0",
        "SELECT 1 SETTINGS max_result_rows = 0",
    ):
        with pytest.raises(StoreError, match=r"\(READONLY\)"):
            session.query(write, {})
    assert store_snapshot(store) == before
    assert watch.untouched() == []
    # the session's settings are its own: the store's handle is not read-only
    assert store.query("SELECT getSetting('readonly')").rows == [(0,)]
    assert session.query("SELECT getSetting('readonly')", {}).rows == [(1,)]


READS = [
    # (query, params, rows): what a user may still write
    ("select count() FROM runs ;  ", {}, [(40,)]),
    ("SELECT 1;;", {}, [(1,)]),
    ("-- a note; not a statement\nSELECT ';' AS s", {}, [(";",)]),
    ("SELECT $$it's$$ AS s /* ; DROP TABLE runs */", {}, [("it's",)]),
    ("WITH t AS (SELECT run_id FROM runs) SELECT count() FROM t", {}, [(40,)]),
    (
        "SELECT count() FROM gpufrag.runs FINAL WHERE run_id IN (SELECT run_id FROM runs)",
        {},
        [(40,)],
    ),
    ("SELECT x FROM (SELECT 1 AS x UNION ALL SELECT 2) ORDER BY x", {}, [(1,), (2,)]),
    (
        "SELECT {n:UInt32} + 1 AS next, {s:String} AS s",
        {"n": "41", "s": "a'; DROP"},
        [(42, "a'; DROP")],
    ),
    ("SELECT arrayMap(x -> x * 2, [1, 2]) AS a", {}, [([2, 4],)]),
    ("SELECT status, count() FROM runs GROUP BY status", {}, [("finished", 40)]),
    # aggregate combinators and the parser's own names are known functions
    ("SELECT countIf(status = 'finished'), uniqArrayIf([run_id], 1) FROM runs", {}, [(40, 40)]),
    ("SELECT count() FROM runs WHERE EXISTS (SELECT 1)", {}, [(40,)]),
]


@pytest.mark.parametrize(("text", "params", "rows"), READS, ids=[r[0][:30] for r in READS])
def test_reads_still_run(
    probe: Probe,
    text: str,
    params: dict[str, str],
    rows: list[tuple[object, ...]],
) -> None:
    assert run_adhoc(probe[1], text, params, limits=LIMITS).rows == rows
