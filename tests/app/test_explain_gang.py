"""A gang waiting for room, end to end: real-shaped pods of a Volcano gang through the embedded
runner (actions planned as a dry run, the default) into a chDB store; the gang's stored row,
`gpufrag explain ns/gang:NAME` (text and ``--json``) reading it, and the reclaim planned for
the gang as its fix."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from connectors.clickhouse.rows import QUOTA_COLUMNS
from models import GpufragSettings
from streams.app.queries.explained_row import verdict
from tests.app.embedded_store import minute_apart, stored_run
from tests.app.pipeline_helpers import gpufrag, store_at
from tests.streams.gang_scenarios import GANG, GANG_KEY, MEMBERS, steps

RUN = "run-gang"


@pytest.fixture(scope="module")
def dsn(tmp_path_factory: pytest.TempPathFactory) -> str:
    return stored_run(tmp_path_factory.mktemp("gang"), minute_apart(steps()), run_id=RUN)


def _rows(dsn: str, sql: str) -> list[dict[str, Any]]:
    with store_at(dsn) as st:
        return st.query(sql, {"r": RUN}).dicts()


def test_a_gang_waiting_for_room_is_one_stored_row_with_its_figures(dsn: str) -> None:
    rows = _rows(
        dsn,
        "SELECT pod, unplaceable, fits_cluster_total, fits_some_node, reasons, gpu_count, "
        "gpu_milli, gang, gang_min_member, gang_bound, gang_members, gang_placeable_together, "
        "gang_needed, gang_member_shown FROM pending_explanations FINAL "
        "WHERE run_id = {r:String} ORDER BY ts, pod",
    )
    # the members have no rows of their own: the gang is what waits
    assert [r["pod"] for r in rows] == [GANG_KEY]
    (row,) = rows
    assert row == {
        "pod": GANG_KEY,
        "unplaceable": 1,
        "fits_cluster_total": 1,
        "fits_some_node": 0,
        # llm-w1 alone: gpu-1's 6 free GPUs would take it, gpu-2's 2 would not
        "reasons": {"gpu_count": 1},
        "gpu_count": 4,
        "gpu_milli": 1000,
        "gang": GANG,
        "gang_min_member": 2,
        "gang_bound": 0,
        "gang_members": list(MEMBERS),
        "gang_placeable_together": 1,
        "gang_needed": 2,
        "gang_member_shown": MEMBERS[1],
    }


def test_explain_answers_a_gang_with_its_counts_reasons_and_fix(dsn: str) -> None:
    out = gpufrag(dsn, "explain", GANG_KEY)
    assert out.returncode == 0, out.stderr
    text = " ".join(out.stdout.split())  # the console wraps long lines
    assert f"gang {GANG}: minMember 2, 0 bound, 2 pending ({', '.join(MEMBERS)})" in text
    assert "placed together: 1 of the 2 members still needed" in text
    assert f"request and reasons below: {MEMBERS[1]} checked alone" in text
    assert "fit the cluster's free total but not together (fragmentation)" in text
    assert "gpu_count 1" in text and "gpu-2 gpu_count 0 0 2" in text  # reason, closest node
    assert "evict ml/batch-c on gpu-2; what-if: placeable before no, after yes" in text
    assert "proposed (dry_run)" in text

    member = gpufrag(dsn, "explain", MEMBERS[0])
    assert member.returncode == 0, member.stderr
    said = " ".join(member.stdout.split())
    assert f"{MEMBERS[0]} waits as a member of gang {GANG_KEY}: the gang's row follows" in said
    assert "placed together: 1 of the 2" in said


def test_explain_json_folds_the_gang_columns_into_one_object(dsn: str) -> None:
    out = gpufrag(dsn, "explain", GANG_KEY, "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["gang"] == {
        "name": GANG,
        "min_member": 2,
        "bound": 0,
        "pending": 2,
        "members": list(MEMBERS),
        "placeable_together": 1,
        "needed": 2,
        "member_shown": MEMBERS[1],
    }
    assert not any(k.startswith("gang_") for k in doc)
    assert (doc["pod"], doc["asked"], doc["unplaceable"]) == (GANG_KEY, GANG_KEY, 1)
    assert doc["verdict"].startswith("its needed members fit the cluster's free total")
    by_member = json.loads(gpufrag(dsn, "explain", MEMBERS[1], "--json").stdout)
    assert (by_member["pod"], by_member["asked"]) == (GANG_KEY, MEMBERS[1])


def test_the_smallest_reclaim_is_planned_for_the_gang(dsn: str) -> None:
    """One low-priority pod evicted, on the node the second member lands on: batch-c (the
    lowest priority of the three single-victim plans), llm-w1 placed on gpu-2 beside batch-b,
    llm-w0 on gpu-1 beside batch-a, which both stay."""
    actions = _rows(
        dsn,
        "SELECT kind, mode, outcome, target, evidence FROM actions FINAL "
        "WHERE run_id = {r:String} ORDER BY id",
    )
    assert [(a["kind"], a["mode"], a["outcome"], a["target"]) for a in actions] == [
        ("reclaim", "dry_run", "proposed", "ml/batch-c")
    ]
    evidence = json.loads(actions[0]["evidence"])
    assert evidence["beneficiary"] == GANG_KEY
    assert [(v["pod"], v["node"], v["priority"]) for v in evidence["victims"]] == [
        ("ml/batch-c", "gpu-2", 0)
    ]
    assert evidence["whatif"] == {
        "placeable_before": False,
        "placeable_after": True,
        "placed": {MEMBERS[0]: "gpu-1", MEMBERS[1]: "gpu-2"},
    }
    listed = gpufrag(dsn, "actions", "--pod", GANG_KEY, "--json")
    assert listed.returncode == 0, listed.stderr
    assert [a["target"] for a in json.loads(listed.stdout)["actions"]] == ["ml/batch-c"]
    # explain shows it as the gang's fix, beside the gang's cause
    shown = gpufrag(dsn, "explain", GANG_KEY, "--json")
    assert shown.returncode == 0, shown.stderr
    doc = json.loads(shown.stdout)
    assert doc["gang"]["placeable_together"] == 1
    assert [(f["target"], f["evidence"]["whatif"]["placeable_after"]) for f in doc["fixes"]] == [
        ("ml/batch-c", True)
    ]
    assert doc["fix_counts"] == {"proposed": 1}


def _gang_row(**columns: object) -> dict[str, object]:
    base: dict[str, object] = {"gang": GANG, "unplaceable": 0, "fits_some_node": 1, "reasons": {}}
    return {**base, **dict.fromkeys(QUOTA_COLUMNS), **columns}


def test_a_gangs_verdict_speaks_of_its_members_together() -> None:
    assert verdict(_gang_row()) == (
        "its needed members fit together now; it was waiting for the scheduler"
    )
    held = verdict(_gang_row(quota_blocker="VolcanoQueue:prod", reasons={"quota": 2}))
    assert held == (
        "held by quota: its needed members fit together now, but VolcanoQueue:prod has no room"
    )
    full = verdict(_gang_row(fits_some_node=0))
    assert full.startswith("its needed members do not fit even the cluster's free total")


def test_a_gang_whose_victims_are_all_protected_says_which_guardrail(tmp_path: Path) -> None:
    """The same gang with namespace ml protected: no plan, and the gang's own row says why
    (the planners' reasons are keyed by the signal's scope, which is the gang's row key)."""
    base = GpufragSettings()
    config = base.model_copy(
        update={
            "guardrails": base.guardrails.model_copy(
                update={"protected_namespaces": (*base.guardrails.protected_namespaces, "ml")}
            )
        }
    )
    dsn = stored_run(tmp_path, minute_apart(steps()), run_id=RUN, config=config)
    shown = gpufrag(dsn, "explain", GANG_KEY, "--json")
    assert shown.returncode == 0, shown.stderr
    doc = json.loads(shown.stdout)
    assert doc["fixes"] == [] and doc["no_fix"] is not None
    by_planner = {r["planner"]: r for r in doc["no_fix"]["reasons"]}
    assert by_planner["reclaim"]["code"] == "protected_namespace"
    assert by_planner["reclaim"]["guardrail"] is True
    text = " ".join(gpufrag(dsn, "explain", GANG_KEY).stdout.split())
    assert "no fix: reclaim: every candidate victim" in text
    assert "protected namespace ml (guardrail protected_namespace)" in text
