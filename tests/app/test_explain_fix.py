"""The proven fix, or the guardrail that stops it, end to end: three small hand-built clusters
(real-shaped Kubernetes nodes and pods) through the embedded runner into a chDB store with the
guardrails in dry-run, then `gpufrag explain` (text and ``--json``) on the pending pod.

- reclaim: a high-priority pod, a low-priority pod to evict; explain shows the plan, its
  victim and its what-if;
- consolidation: two free GPUs split across two nodes, a small pod that can move;
- protected namespace: the only pods that could make room are in kube-system; explain says
  there is no fix and names the guardrail, where before it stored nothing at all.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from models import GpufragSettings
from tests.app.embedded_store import minute_apart, stored_run
from tests.app.pipeline_helpers import gpufrag, store_at
from tests.streams.quota_scenarios import Step, gpu_node, gpu_pod

RUN = "run-fix"


@dataclass(frozen=True, slots=True)
class Case:
    nodes: dict[str, int]
    running: list[tuple[str, str, int, int, str]]
    """(name, namespace, GPUs, priority, node)."""
    pending: tuple[str, int, int]
    """(name in ml, GPUs, priority)."""

    def steps(self) -> list[Step]:
        name, gpus, priority = self.pending
        return [
            Step([gpu_node(n, g) for n, g in self.nodes.items()]),
            Step([gpu_pod(n, ns, gpus=g, priority=p, on=on) for n, ns, g, p, on in self.running]),
            Step([gpu_pod(name, "ml", gpus=gpus, priority=priority)]),
            # a later change, so the queue is evaluated again with the pod still pending: the
            # no-fix stays on the row of the instant it was planned for, not on every row
            Step([gpu_pod("notebook", "lab", gpus=0, priority=0)]),
        ]


CASES = {
    # 2 + 2 GPUs free, the 4-GPU pod fits neither node; low (2 GPUs) is too big to move, vip
    # is far above the pod: reclaim evicts low
    "reclaim": Case(
        nodes={"a": 4, "b": 4},
        running=[("low", "ml", 2, 0, "a"), ("vip", "ml", 2, 1000, "b")],
        pending=("urgent", 4, 100),
    ),
    # 1 + 1 GPUs free, the 2-GPU pod fits neither node; small moves to b, freeing a
    "consolidation": Case(
        nodes={"a": 2, "b": 2},
        running=[("small", "ml", 1, 0, "a"), ("busy", "ml", 1, 50, "b")],
        pending=("train", 2, 10),
    ),
    # the same shape, but the pods that could make room are the cluster's own
    "protected": Case(
        nodes={"a": 2, "b": 2},
        running=[("agent-a", "kube-system", 1, 0, "a"), ("agent-b", "kube-system", 1, 0, "b")],
        pending=("train", 2, 10),
    ),
}


def _explain(dsn: str, pod_key: str) -> tuple[str, dict[str, Any]]:
    out = gpufrag(dsn, "explain", pod_key)
    assert out.returncode == 0, out.stderr
    as_json = gpufrag(dsn, "explain", pod_key, "--json")
    assert as_json.returncode == 0, as_json.stderr
    return " ".join(out.stdout.split()), json.loads(as_json.stdout)


def _no_fix_rows(dsn: str, pod_key: str) -> tuple[int, int]:
    """(explanation rows of the pod, those that carry a no-fix)."""
    with store_at(dsn) as st:
        rows = st.query(
            "SELECT count(), countIf(no_fix IS NOT NULL) FROM pending_explanations FINAL "
            "WHERE run_id = {r:String} AND pod = {p:String}",
            {"r": RUN, "p": pod_key},
        ).rows
    return int(str(rows[0][0])), int(str(rows[0][1]))


@pytest.mark.parametrize("case", sorted(CASES))
def test_explain_shows_the_fix_or_the_guardrail_that_stops_it(tmp_path: Path, case: str) -> None:
    config = GpufragSettings()
    assert config.guardrails.mode == "dry-run"
    assert "kube-system" in config.guardrails.protected_namespaces
    spec = CASES[case]
    pod_key = f"ml/{spec.pending[0]}"
    events = minute_apart([step.events for step in spec.steps()])
    dsn = stored_run(tmp_path, events, run_id=RUN, config=config)
    text, doc = _explain(dsn, pod_key)
    assert doc["unplaceable"] == 1

    if case == "protected":
        assert doc["fixes"] == [] and doc["fix_counts"] == {}
        no_fix = doc.get("no_fix")
        assert no_fix is not None, text
        by_planner = {r["planner"]: r for r in no_fix["reasons"]}
        assert set(by_planner) == {"consolidate", "reclaim"}
        for r in by_planner.values():
            assert r["code"] == "protected_namespace" and r["guardrail"] is True
            assert (r["pods"], r["nodes"]) == (2, 2)
        assert (
            "no fix: reclaim: every candidate victim (2 pods on 2 nodes) is in protected "
            "namespace kube-system (guardrail protected_namespace)"
        ) in text
        assert (
            "no fix: consolidate: every pod that could move (2 pods on 2 nodes) is in "
            "protected namespace kube-system (guardrail protected_namespace)"
        ) in text
        assert "no plan stored" not in text
        # once, on the row of the instant it was planned for, not on every later evaluation
        assert _no_fix_rows(dsn, pod_key) == (2, 1)
        return

    # a plan was made: it is the fix shown, and nothing says there is none
    assert "no_fix" in doc and doc["no_fix"] is None
    assert "no fix" not in text
    assert _no_fix_rows(dsn, pod_key) == (2, 0)
    (fix,) = doc["fixes"]
    assert fix["outcome"] == "proposed" and fix["mode"] == "dry_run"
    assert fix["evidence"]["beneficiary"] == pod_key
    whatif = fix["evidence"]["whatif"]
    assert (whatif["placeable_before"], whatif["placeable_after"]) == (False, True)
    assert "what-if: placeable before no, after yes; proposed (dry_run)" in text
    if case == "reclaim":
        assert fix["kind"] == "reclaim" and fix["target"] == "ml/low"
        assert [v["pod"] for v in fix["evidence"]["victims"]] == ["ml/low"]
        assert "reclaim at" in text and "evict ml/low on a" in text
    else:
        assert fix["kind"] == "consolidate" and fix["target"] == "ml/small"
        assert fix["evidence"]["moves"] == {"ml/small": "b"}
        assert "consolidate at" in text and "move ml/small to b (frees a)" in text
