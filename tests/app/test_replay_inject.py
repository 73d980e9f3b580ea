"""`gpufrag replay --inject-oom-storms N`: the summary's storm counts, in JSON and as a table,
agree with what the store holds."""

from __future__ import annotations

import json
from pathlib import Path

from connectors.trace.bundled import bundled_pods_path
from streams.simulation.incidents import SOURCE
from tests.app.pipeline_helpers import dsn_for, gpufrag, store_at, stored_signals

STORM_KEYS = ("storms_injected", "storms_found", "storms_false_positive")


def reduced_pods(tmp_path: Path) -> Path:
    """Every 20th pod of the bundled list (408 pods over its 149 days): a replay of seconds."""
    header, *rows = bundled_pods_path().read_text().splitlines()
    path = tmp_path / "pods.csv"
    path.write_text("\n".join([header, *rows[::20]]) + "\n")
    return path


def test_json_summary_counts_the_injected_storms_found(tmp_path: Path) -> None:
    dsn = dsn_for(tmp_path / "st")
    pods = str(reduced_pods(tmp_path))
    common = ["replay", "--mode", "timeline", "--pods", pods, "--node-limit", "40", "--seed", "9"]
    out = gpufrag(dsn, *common, "--inject-oom-storms", "3", "--json")
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    assert [summary[k] for k in STORM_KEYS] == [3, 3, 0]
    opened = [s for s in stored_signals(dsn) if s["kind"] == "oom_storm" and s["state"] == "open"]
    assert summary["signals"]["oom_storm"]["open"] == len(opened) >= 3
    with store_at(dsn) as st:
        (injected,) = st.query(
            "SELECT count() FROM events WHERE source = {s:String}", {"s": SOURCE}
        ).rows[0]
        (params,) = st.query("SELECT params FROM runs FINAL").rows[0]
    assert int(str(injected)) > 3 * 4  # pods, readings, kills and deletions of 3 incidents
    assert json.loads(str(params))["inject_oom_storms"] == 3
    # without injection the keys are there, at zero, and it is another run
    plain = json.loads(gpufrag(dsn, *common, "--json").stdout)
    assert [plain[k] for k in STORM_KEYS] == [0, 0, 0]
    assert plain["run_id"] != summary["run_id"]


def test_table_summary_shows_the_storm_counts_in_fgd_mode(tmp_path: Path) -> None:
    out = gpufrag(
        dsn_for(tmp_path / "st"),
        "replay",
        "--mode",
        "fgd",
        "--pods",
        str(reduced_pods(tmp_path)),
        "--node-limit",
        "40",
        "--inject-oom-storms",
        "2",
    )
    assert out.returncode == 0, out.stderr
    row = next(ln for ln in out.stdout.splitlines() if "OOM storms injected" in ln)
    assert "2 / 2 / 0" in row
