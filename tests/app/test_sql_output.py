"""`gpufrag sql --query` output and limits, as a user runs it: every column type in JSON and
CSV, a header for an empty result, and the session's row, time and memory limits."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from models.settings import SqlSettings
from streams.app.lifecycle.history import open_history, store_settings
from tests.app.pipeline_helpers import dsn_for, gpufrag, gpufrag_env, store_at
from tests.app.sql_probe import seed_rows

EVERY_TYPE = (
    "SELECT toDate('2026-01-02') AS d, toDate32('1950-03-04') AS d32, "
    "toDateTime64('2026-01-02 03:04:05.678', 3, 'UTC') AS ts, "
    "toUUID('00000000-0000-0000-0000-000000000001') AS u, toDecimal64(1.25, 2) AS dec, "
    "toDecimal128('12345678901234567890.5', 1) AS big, toIPv4('1.2.3.4') AS ip4, "
    "toIPv6('::1') AS ip6, nan AS f, inf AS g, toFixedString('ab', 3) AS fs, "
    "map('a', 1) AS m, (1, 'x') AS t, [toDate('2026-01-01')] AS a, toInt128(7) AS i128, "
    "toUInt256(8) AS u256, CAST('b' AS Enum8('a' = 1, 'b' = 2)) AS e, NULL AS n, true AS b, "
    "toLowCardinality('lc') AS lc, toBFloat16(1.5) AS bf"
)

EXPECTED = {
    "d": "2026-01-02",
    "d32": "1950-03-04",
    "ts": "2026-01-02T03:04:05.678000+00:00",
    "u": "00000000-0000-0000-0000-000000000001",
    "dec": "1.25",
    "big": "12345678901234567890.5",
    "ip4": "1.2.3.4",
    "ip6": "::1",
    "f": None,
    "g": None,
    "fs": "ab",
    "m": {"a": 1},
    "t": [1, "x"],
    "a": ["2026-01-01"],
    "i128": 7,
    "u256": 8,
    "e": "b",
    "n": None,
    "b": True,
    "lc": "lc",
    "bf": 1.5,
}


@pytest.fixture
def dsn(tmp_path: Path) -> str:
    made = dsn_for(tmp_path / "st")
    open_history(store_settings(made)).close()
    return made


def test_json_carries_every_column_type(dsn: str) -> None:
    out = gpufrag(dsn, "sql", "--query", EVERY_TYPE, "--format", "json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == [EXPECTED]


def test_csv_carries_every_column_type(dsn: str) -> None:
    out = gpufrag(dsn, "sql", "--query", EVERY_TYPE, "--format", "csv")
    assert out.returncode == 0, out.stderr
    header, row = list(csv.reader(io.StringIO(out.stdout)))
    assert header == list(EXPECTED)
    cells = dict(zip(header, row, strict=True))
    assert cells["u"] == EXPECTED["u"] and cells["big"] == EXPECTED["big"]
    assert cells["f"] == "" and cells["n"] == ""


def test_an_empty_result_still_has_its_header(dsn: str) -> None:
    query = "SELECT run_id, started_at AS at FROM runs WHERE run_id = 'none'"
    as_csv = gpufrag(dsn, "sql", "--query", query, "--format", "csv")
    assert as_csv.returncode == 0, as_csv.stderr
    assert as_csv.stdout.splitlines() == ["run_id,at"]
    as_json = gpufrag(dsn, "sql", "--query", query, "--format", "json")
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout) == []


def _limited(dsn: str, query: str, **limits: str) -> tuple[int, list[str]]:
    env = gpufrag_env(dsn)
    env.update({f"GPUFRAG_SQL__{k.upper()}": v for k, v in limits.items()})
    done = subprocess.run(
        [sys.executable, "-m", "streams.app", "sql", "--query", query, "--format", "csv"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=env,
    )
    return done.returncode, done.stderr.strip().splitlines()


@pytest.fixture
def filled(dsn: str) -> str:
    with store_at(dsn) as st:
        seed_rows(st, runs=3000)  # a 9-million-row cross join
    return dsn


# A cross join of 3,000 x 3,000 rows, each a fresh string: the command took 2.6 s and 1.5 GB
# (peak RSS) on this machine unlimited, far past 0.05 s and 64 MiB.
HEAVY = "SELECT uniqExact(concat(a.run_id, b.run_id)) AS n FROM runs AS a, runs AS b"


@pytest.mark.parametrize(
    ("query", "limits", "says"),
    [
        (
            "SELECT run_id FROM runs",
            {"max_result_rows": "5"},
            "--query stopped: it returns more than 5 rows (GPUFRAG_SQL__MAX_RESULT_ROWS)",
        ),
        (HEAVY, {"max_execution_time_s": "0.05"}, "it ran past 0.05 s"),
        (HEAVY, {"max_memory_bytes": str(64 * 1024**2)}, "GPUFRAG_SQL__MAX_MEMORY_BYTES"),
    ],
    ids=["rows", "time", "memory"],
)
def test_a_query_past_a_limit_stops_with_one_line(
    filled: str, query: str, limits: dict[str, str], says: str
) -> None:
    code, lines = _limited(filled, query, **limits)
    assert code == 2, lines
    assert len(lines) == 1 and says in lines[0], lines


def test_within_the_limits_the_same_query_answers(filled: str) -> None:
    code, lines = _limited(filled, "SELECT count() AS n FROM runs", max_result_rows="5")
    assert code == 0, lines


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_execution_time_s", float("inf")),
        ("max_execution_time_s", float("nan")),
        ("max_execution_time_s", 0),
        ("max_execution_time_s", 7200),
        ("max_result_rows", 0),
        ("max_memory_bytes", 1024),
    ],
)
def test_the_limits_are_bounded(field: str, value: float) -> None:
    with pytest.raises(ValidationError):
        SqlSettings.model_validate({field: value})


def test_the_table_shows_stored_text_as_text(dsn: str) -> None:
    """Stored text comes from the cluster: rich markup and escape sequences stay inert."""
    query = "SELECT '[red]x[/red]' AS markup, concat('a', char(27), '[2Jb') AS escape"
    out = gpufrag(dsn, "sql", "--query", query)
    assert out.returncode == 0, out.stderr
    assert "[red]x[/red]" in out.stdout
    assert "\x1b" not in out.stdout and "ab" in out.stdout
