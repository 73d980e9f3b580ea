"""`gpufrag actions`, run as a user runs it, on a chDB store holding real ``Action`` rows of
several runs: which run it shows, the filters, the JSON, the evidence, and the empty answers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from connectors.clickhouse import apply_migrations, default_sql_dir
from connectors.clickhouse.rows import action_row
from models.actions import Action, ActionKind, ActionMode, ActionOutcome
from models.signals import Scope
from streams.app.lifecycle.runs import FINISHED, run_row
from tests.app.pipeline_helpers import dsn_for, store_at

STARTED = datetime(2026, 12, 1, 21, 0, tzinfo=UTC)
# A replay stamps actions with the trace's event time, years before its run started.
EVENT_TIME = datetime(2023, 7, 1, tzinfo=UTC)
FINGERPRINT = "0123456789abcdef"


def _run(run_id: str, started: datetime) -> dict[str, object]:
    return run_row(
        run_id,
        status=FINISHED,
        started=started,
        source="test",
        mode="fgd",
        policy="fgd",
        seed=0,
        params={},
        summary={},
    )


def _action(
    action_id: str,
    kind: ActionKind,
    outcome: ActionOutcome,
    *,
    minute: int,
    mode: ActionMode = ActionMode.DRY_RUN,
    reason: str = "stranded GPUs",
) -> Action:
    return Action(
        id=action_id,
        kind=kind,
        mode=mode,
        outcome=outcome,
        target_scope=Scope.NODE,
        target=f"node-{action_id}",
        signal_fingerprint=FINGERPRINT if kind is ActionKind.RECLAIM else None,
        reason=reason,
        evidence={"idle_gpu_milli": 1000 * minute, "lacks": ["cpu"], "action": action_id},
        created_at=EVENT_TIME + timedelta(minutes=minute),
    )


NEW = [
    _action("r1", ActionKind.RECLAIM, ActionOutcome.PROPOSED, minute=1),
    _action("q1", ActionKind.QUARANTINE, ActionOutcome.EXECUTED, minute=2, mode=ActionMode.ENFORCE),
    _action("r2", ActionKind.RECLAIM, ActionOutcome.REFUSED, minute=3, reason="[bold]cooldown"),
    _action("r3", ActionKind.RECLAIM, ActionOutcome.PROPOSED, minute=4),
]
# Its actions are later in event time than the newer run's: the run's start must decide.
OLD = [_action("o1", ActionKind.CONSOLIDATE, ActionOutcome.PROPOSED, minute=60)]


@pytest.fixture(scope="module")
def dsn(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Runs old (actions), new (actions), idle (newest, none), and actions of a run that has
    no ``runs`` row. q1 is stored twice, failed and then executed: the retry's answer wins."""
    dsn = dsn_for(tmp_path_factory.mktemp("actions") / "store")
    with store_at(dsn) as st:
        apply_migrations(st, default_sql_dir())
        st.insert(
            "runs",
            [
                _run("run-old", STARTED),
                _run("run-new", STARTED + timedelta(hours=1)),
                _run("run-idle", STARTED + timedelta(hours=2)),
            ],
        )
        failed = NEW[1].model_copy(update={"outcome": ActionOutcome.FAILED})
        st.insert("actions", [action_row("run-new", failed)])
        st.insert("actions", [action_row("run-new", a) for a in NEW])
        st.insert("actions", [action_row("run-old", a) for a in OLD])
        st.insert("actions", [action_row("rowless", a) for a in OLD])
    return dsn


def actions(dsn: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Through ``--store``, piped as a script reads it, with COLUMNS narrower than the table:
    piped, its rows must still come whole, one line each."""
    env = {k: v for k, v in os.environ.items() if k != "GPUFRAG_STORE__DSN"} | {"COLUMNS": "40"}
    return subprocess.run(
        [sys.executable, "-m", "streams.app", "actions", "--store", dsn, *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=env,
    )


def as_json(dsn: str, *args: str) -> dict[str, Any]:
    out = actions(dsn, "--json", *args)
    assert out.returncode == 0, out.stderr
    data: dict[str, Any] = json.loads(out.stdout)
    return data


def test_the_default_is_the_latest_started_run_with_actions(dsn: str) -> None:
    out = actions(dsn, "--json")
    assert out.returncode == 0, out.stderr
    note = out.stderr.strip()
    assert note.startswith("gpufrag: reading run run-new (finished "), note
    assert note.endswith(" UTC), the latest run with actions"), note
    data = json.loads(out.stdout)
    assert set(data) == {"run_id", "actions", "counts"}
    assert data["run_id"] == "run-new"
    assert [a["id"] for a in data["actions"]] == ["r1", "q1", "r2", "r3"]  # oldest first
    assert data["counts"] == {
        "reclaim": {"proposed": 2, "refused": 1},
        "quarantine": {"executed": 1},
    }
    q1 = data["actions"][1]
    assert q1 == {
        "run_id": "run-new",
        "id": "q1",
        "kind": "quarantine",
        "mode": "enforce",
        "outcome": "executed",  # the retry's answer, not the failure stored before it
        "target_scope": "node",
        "target": "node-q1",
        "signal_fingerprint": None,
        "reason": "stranded GPUs",
        "evidence": {"action": "q1", "idle_gpu_milli": 2000, "lacks": ["cpu"]},
        "created_at": "2023-07-01T00:02:00+00:00",
    }
    assert data["actions"][0]["signal_fingerprint"] == FINGERPRINT


def test_text_shows_the_table_each_evidence_and_the_tally(dsn: str) -> None:
    out = actions(dsn)
    assert out.returncode == 0, out.stderr
    assert "reading run run-new" in out.stderr
    lines = out.stdout.splitlines()
    assert "actions of run run-new (all 4, oldest first)" in out.stdout
    row = [cell for cell in next(ln for ln in lines if "node-r2" in ln).split() if cell != "│"]
    assert row[:8] == [
        "3",
        "2023-07-01",
        "00:03:00",
        "reclaim",
        "dry_run",
        "refused",
        "node:node-r2",
        FINGERPRINT[:8],
    ]
    assert "[bold]cooldown" in out.stdout  # stored text is shown, not read as markup
    evidence = lines[lines.index("evidence:") + 1 :]
    assert evidence[2:4] == [
        "  #2 q1",
        '    {"action":"q1","idle_gpu_milli":2000,"lacks":["cpu"]}',
    ]
    assert lines[-1] == ("4 actions: reclaim 3 (proposed 2, refused 1), quarantine 1 (executed 1)")
    bare = actions(dsn, "--no-evidence")
    assert bare.returncode == 0, bare.stderr
    assert "evidence:" not in bare.stdout and '"lacks"' not in bare.stdout
    assert bare.stdout.splitlines()[-1] == lines[-1]


def test_filters_narrow_the_rows_and_the_counts(dsn: str) -> None:
    data = as_json(dsn, "--kind", "reclaim", "--outcome", "proposed")
    assert [a["id"] for a in data["actions"]] == ["r1", "r3"]
    assert data["counts"] == {"reclaim": {"proposed": 2}}
    data = as_json(dsn, "--mode", "enforce")
    assert [a["id"] for a in data["actions"]] == ["q1"]
    old = actions(dsn, "--run", "run-old", "--json")
    assert old.returncode == 0, old.stderr
    assert old.stderr == ""  # a finished run the user named needs no note
    assert [a["id"] for a in json.loads(old.stdout)["actions"]] == ["o1"]


def test_the_limit_keeps_the_latest_and_the_tally_counts_them_all(dsn: str) -> None:
    data = as_json(dsn, "--limit", "2")
    assert [a["id"] for a in data["actions"]] == ["r2", "r3"]
    assert sum(n for o in data["counts"].values() for n in o.values()) == 4
    out = actions(dsn, "--limit", "2", "--no-evidence")
    assert "(the latest 2 of 4, oldest first)" in out.stdout
    assert out.stdout.splitlines()[-1].endswith("; the latest 2 shown (--limit)")


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (
            ["--kind", "consolidate"],
            "no actions of run run-new match --kind consolidate (it has 4)",
        ),
        (["--run", "run-idle"], "no actions stored for run run-idle"),
    ],
)
def test_an_empty_answer_is_one_line_and_exit_0(dsn: str, args: list[str], said: str) -> None:
    out = actions(dsn, *args)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == said
    data = as_json(dsn, *args)
    assert data["actions"] == [] and data["counts"] == {}


def test_a_run_without_a_runs_row_is_shown_when_named(dsn: str) -> None:
    out = actions(dsn, "--run", "rowless", "--json")
    assert out.returncode == 0, out.stderr
    assert out.stderr.strip() == "gpufrag: showing run rowless (no row in runs)"
    assert json.loads(out.stdout)["counts"] == {"consolidate": {"proposed": 1}}


def test_an_unknown_run_is_exit_2_naming_the_runs_that_have_actions(dsn: str) -> None:
    out = actions(dsn, "--run", "nope")
    assert out.returncode == 2
    assert out.stderr.strip() == (
        "gpufrag: error: no run 'nope' in the store; runs with actions, newest first: "
        "run-new, run-old, rowless (`gpufrag actions` without --run shows the newest)"
    )
    assert out.stdout == ""


def test_a_store_without_actions_says_so(tmp_path: Path) -> None:
    dsn = dsn_for(tmp_path / "store")
    with store_at(dsn) as st:
        apply_migrations(st, default_sql_dir())
        st.insert("runs", [_run("run-idle", STARTED)])
    out = actions(dsn)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "no actions in the store"
    out = actions(dsn, "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"run_id": None, "actions": [], "counts": {}}
    assert out.stderr.strip() == "gpufrag: no actions in the store"
    unknown = actions(dsn, "--run", "nope")
    assert unknown.returncode == 2
    assert "no run 'nope' in the store; no run in it has actions" in unknown.stderr


def test_a_store_another_process_holds_is_one_line_and_exit_2(dsn: str) -> None:
    with store_at(dsn):
        busy = actions(dsn)
    assert busy.returncode == 2
    assert len(busy.stderr.strip().splitlines()) == 1, busy.stderr
    assert "is in use by another gpufrag process" in busy.stderr
    assert "Traceback" not in busy.stderr
