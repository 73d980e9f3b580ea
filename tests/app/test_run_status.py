"""Run status without a process to ask: a ``running`` run whose process is gone becomes
``abandoned`` when the store is next opened, and read commands read the latest finished run
by default and say which run they read."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from connectors.clickhouse import QueryResult, Store, StoreError, open_store
from models import StoreSettings
from streams.app.lifecycle.history import open_history, open_history_to_read
from streams.app.lifecycle.runs import abandon_orphaned_runs, choose_run, run_row
from streams.app.queries.named_queries import QueryError

T0 = datetime(2026, 12, 1, 21, 0, tzinfo=UTC)


def _row(run_id: str, status: str, started: datetime) -> dict[str, object]:
    return run_row(
        run_id,
        status=status,
        started=started,
        source="trace:x",
        mode="fgd",
        policy="fgd",
        seed=7,
        params={"ratio": 1.3},
        summary={"events": 5} if status != "running" else {},
    )


@pytest.fixture
def settings(tmp_path: Path) -> StoreSettings:
    return StoreSettings(dsn=f"chdb://{tmp_path}/st")


@pytest.fixture
def seeded(settings: StoreSettings) -> Iterator[StoreSettings]:
    """A store left by three processes: one finished, then two killed while running."""
    with open_history(settings) as st:
        st.insert(
            "runs",
            [
                _row("done", "finished", T0),
                _row("killed-1", "running", T0 + timedelta(minutes=1)),
                _row("killed-2", "running", T0 + timedelta(minutes=2)),
            ],
        )
    yield settings


def _runs(st: Store) -> dict[str, dict[str, object]]:
    res = st.query("SELECT * FROM runs FINAL")
    return {str(r["run_id"]): r for r in res.dicts()}


def test_the_next_open_marks_running_runs_abandoned_and_says_so(
    seeded: StoreSettings, capsys: pytest.CaptureFixture[str]
) -> None:
    with open_store(seeded) as st:
        before = _runs(st)
    with open_history(seeded) as st:
        after = _runs(st)
    assert {k: v["status"] for k, v in after.items()} == {
        "done": "finished",
        "killed-1": "abandoned",
        "killed-2": "abandoned",
    }
    for run_id in ("killed-1", "killed-2"):
        old, new = before[run_id], after[run_id]
        assert new["updated_at"] > old["updated_at"]  # type: ignore[operator]
        # the new version keeps what the run recorded about itself
        for column in ("started_at", "source", "mode", "policy", "seed", "params", "summary"):
            assert new[column] == old[column], column
    assert after["done"] == before["done"]
    err = capsys.readouterr().err.splitlines()
    assert sorted(err) == [
        f"gpufrag: run {r} was left running by a process that is gone; marked abandoned"
        for r in ("killed-1", "killed-2")
    ]
    with open_history(seeded):
        pass
    assert capsys.readouterr().err == ""  # marked once


def test_the_abandoned_version_wins_even_after_the_clock_stepped_back(
    settings: StoreSettings,
) -> None:
    ahead = _row("r", "running", T0) | {"updated_at": datetime.now(UTC) + timedelta(hours=1)}
    with open_history(settings) as st:
        st.insert("runs", [ahead])
    with open_history(settings) as st:
        assert st.query("SELECT status FROM runs FINAL").rows == [("abandoned",)]


def test_a_run_this_process_may_still_write_is_left_alone(seeded: StoreSettings) -> None:
    """Another part of this process has the store open (a replay writing its run, say): the
    lock that keeps other processes out says nothing about it."""
    with open_store(seeded) as holder:
        with open_history(seeded) as st:
            assert st.query("SELECT count() FROM runs FINAL WHERE status = 'running'").rows == [
                (2,)
            ]
        assert holder.query("SELECT count() FROM runs FINAL WHERE status = 'running'").rows == [
            (2,)
        ]


class _ServerStore:
    """A store that any number of live processes elsewhere may be writing."""

    def exclusive(self) -> bool:
        return False

    def query(self, *_args: object) -> QueryResult:
        raise AssertionError("a server store's runs must not even be looked at")

    def insert(self, *_args: object) -> int:
        raise AssertionError("a live remote run must never be marked")


def test_a_server_store_marks_nothing() -> None:
    assert abandon_orphaned_runs(_ServerStore()) == []  # type: ignore[arg-type]


class _Runs:
    """``runs`` as choose_run reads it: newest first."""

    def __init__(self, *rows: tuple[str, str, int]) -> None:
        self.rows = [
            (run_id, status, T0 + timedelta(minutes=m), T0 + timedelta(minutes=m, seconds=40))
            for run_id, status, m in sorted(rows, key=lambda r: -r[2])
        ]

    def query(self, *_args: object) -> QueryResult:
        return QueryResult(["run_id", "status", "started_at", "updated_at"], self.rows)


def _choose(runs: _Runs, run_id: str | None = None) -> tuple[str, str | None]:
    choice = choose_run(runs, run_id, option="--run ")  # type: ignore[arg-type]
    return choice.run.run_id, choice.note()


def test_the_default_is_the_latest_finished_run_and_the_note_names_what_it_passed() -> None:
    runs = _Runs(("a", "finished", 0), ("b", "finished", 10), ("c", "abandoned", 20))
    assert _choose(runs) == (
        "b",
        "reading run b (finished 2026-12-01 21:10 UTC); newer run c is abandoned",
    )
    assert _choose(_Runs(("a", "finished", 0))) == (
        "a",
        "reading run a (finished 2026-12-01 21:00 UTC)",
    )
    many = _Runs(
        ("a", "finished", 0),
        ("b", "interrupted", 1),
        ("c", "failed", 2),
        ("d", "running", 3),
        ("e", "abandoned", 4),
    )
    assert _choose(many) == (
        "a",
        "reading run a (finished 2026-12-01 21:00 UTC); newer runs e (abandoned), "
        "d (running), c (failed) and 1 more did not finish",
    )


def test_a_named_run_is_read_whatever_its_status_with_the_status_said() -> None:
    runs = _Runs(("a", "finished", 0), ("b", "abandoned", 10), ("c", "interrupted", 20))
    assert _choose(runs, "a") == ("a", None)
    assert _choose(runs, "b") == (
        "b",
        "reading run b (abandoned, started 2026-12-01 21:10 UTC): its process died before "
        "ending it; it holds what was stored until then",
    )
    assert _choose(runs, "c") == (
        "c",
        "reading run c (interrupted 2026-12-01 21:20 UTC): stopped early by Ctrl-C; it holds "
        "what was done until then",
    )
    with pytest.raises(QueryError, match=r"^no run 'zz' in the store$"):
        _choose(runs, "zz")


def test_no_finished_run_is_refused_with_the_option_that_reads_one_anyway() -> None:
    with pytest.raises(QueryError) as err:
        _choose(_Runs(("a", "interrupted", 0), ("b", "abandoned", 5)))
    assert str(err.value) == (
        "the store has no finished run; the newest, b, is abandoned (its process died before "
        "ending it; it holds what was stored until then): pass --run b to read it anyway"
    )
    with pytest.raises(QueryError, match="the store has no runs yet"):
        _choose(_Runs())


def test_a_read_of_a_folder_that_is_not_a_store_is_refused_and_leaves_it_alone(
    tmp_path: Path,
) -> None:
    """A mistyped ``--store`` that names some other folder must not turn it into a store
    (nor find "no runs" there)."""
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "todo.txt").write_text("x")
    with pytest.raises(StoreError, match="the folder holds files but no chDB store"):
        open_history_to_read(StoreSettings(dsn=f"chdb://{folder}"))
    assert sorted(p.name for p in folder.iterdir()) == ["todo.txt"]
