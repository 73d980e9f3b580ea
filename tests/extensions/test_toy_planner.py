"""An extension's planner, registered by its own module with one line and enabled by the
settings, runs in the product's pipeline: its proposal passes the gate and is stored, and
`gpufrag actions --kind` lists it. Nothing in the product names it."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from pydantic import ValidationError

from models.component_registry import UnknownComponent
from models.settings import GuardrailSettings, PlannerSettings
from streams.planners.acting import Acting
from tests.app.pipeline_helpers import dsn_for, gpufrag, store_at

TOY = "tests.extensions.toy_planner"
KIND = "toy_cordon"
BUILTIN = ["consolidate", "reclaim", "quarantine", "evict_aggressor"]
REPLAY = ("replay", "--mode", "fgd", "--node-limit", "20", "--seed", "42", "--json")


Run = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def run(monkeypatch: pytest.MonkeyPatch) -> Run:
    """`gpufrag` with the toy's module named as a plugin, as an operator would name theirs,
    and the planners ``enabled`` lists."""
    monkeypatch.setenv("GPUFRAG_PLUGINS", json.dumps([TOY]))

    def go(dsn: str, *args: str, enabled: list[str]) -> subprocess.CompletedProcess[str]:
        monkeypatch.setenv("GPUFRAG_PLANNERS__ENABLED", json.dumps(enabled))
        return gpufrag(dsn, *args)

    return go


def test_a_plugins_planner_is_gated_and_stored(tmp_path: Path, run: Run) -> None:
    dsn = dsn_for(tmp_path / "st")
    out = run(dsn, *REPLAY, "--actions", "dry-run", enabled=[*BUILTIN, KIND])
    assert out.returncode == 0, out.stderr[-3000:]
    summary = json.loads(out.stdout)
    assert summary["actions"][KIND] == {"proposed": 1}
    with store_at(dsn) as st:
        rows = st.query(
            "SELECT kind, mode, outcome, target_scope, target, evidence FROM actions FINAL "
            "WHERE run_id = {r:String} AND kind = {k:String}",
            {"r": str(summary["run_id"]), "k": KIND},
        ).rows
    assert len(rows) == 1
    kind, mode, outcome, scope, target, evidence = (str(v) for v in rows[0])
    assert (kind, mode, outcome, scope) == (KIND, "dry_run", "proposed", "node")
    assert json.loads(evidence)["node"] == target

    listed = run(dsn, "actions", "--kind", KIND, "--json", enabled=[*BUILTIN, KIND])
    assert listed.returncode == 0, listed.stderr
    assert [a["kind"] for a in json.loads(listed.stdout)["actions"]] == [KIND]


def test_an_unknown_planner_stops_the_command_with_the_known_names(
    tmp_path: Path, run: Run
) -> None:
    out = run(dsn_for(tmp_path / "st"), *REPLAY, enabled=["consolidate", "toy_cordn"])
    assert out.returncode == 2
    line = out.stderr.strip()
    assert line.startswith("gpufrag: error: unknown planner 'toy_cordn' (known: ")
    assert all(name in line for name in [*BUILTIN, KIND]) and "\n" not in line
    assert not (tmp_path / "st").exists()  # refused before the run was recorded


def test_acting_checks_the_enabled_names_and_the_settings_their_form() -> None:
    with pytest.raises(UnknownComponent, match="unknown planner 'nope'"):
        Acting(planners=PlannerSettings(enabled=("nope",)), guardrails=GuardrailSettings())
    with pytest.raises(ValidationError):
        PlannerSettings(enabled=("toy cordon",))
