"""Every command that reads a trace reads it under the same GPUFRAG_TRACE__* settings: a bound
set lower than the bundled lists stops each of them with the same one line, before it connects
to anything (the address given is one nobody listens on)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from connectors.trace.bundled import bundled_pods_path
from streams.app.cli import app_for

NOWHERE = "127.0.0.1:1"


@pytest.mark.parametrize(
    ("argv", "setting", "file"),
    [
        (["publish", "--bootstrap", NOWHERE], "MAX_NODES", "openb_node_list_gpu_node.csv"),
        (["publish", "--bootstrap", NOWHERE], "MAX_PODS", "openb_pod_list_default.csv"),
        (
            ["worker", "--bootstrap", NOWHERE, "--typical-from", str(bundled_pods_path())],
            "MAX_PODS",
            "openb_pod_list_default.csv",
        ),
        (["replay", "--store", "chdb:///nonexistent/never"], "MAX_NODES", "openb_node_list"),
        (
            ["experiment", "--seeds", "1", "--policy", "fgd"],
            "MAX_PODS",
            "openb_pod_list_default.csv",
        ),
    ],
    ids=lambda v: v if isinstance(v, str) else v[0],
)
def test_a_trace_bound_stops_the_command(argv: list[str], setting: str, file: str) -> None:
    out = CliRunner().invoke(app_for(argv), argv, env={f"GPUFRAG_TRACE__{setting}": "5"})
    assert out.exit_code == 2, out.output
    assert file in out.output and f"more than 5 rows (GPUFRAG_TRACE__{setting})" in out.output
