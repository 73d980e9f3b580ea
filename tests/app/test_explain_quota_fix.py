"""A pod held by its full queue gets its proven fix, end to end: real-shaped Volcano and Kueue
objects through the embedded runner into a chDB store with the guardrails in dry-run, then
`gpufrag explain` and `gpufrag actions --pod` on the held pod.

- a Volcano queue at its capability, a waiting higher-priority pod and two lower-priority
  pods running in the same queue: a stored quota-reclaim plan evicting one of them;
- the same for a Kueue ClusterQueue without a cohort;
- the queue's only pods are in kube-system: "no fix" naming the guardrail.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from connectors.kube.watch.queue_objects import (
    cluster_queue_from_dict,
    local_queue_from_dict,
    volcano_queue_from_dict,
    workload_from_dict,
)
from models import Envelope, GpufragSettings
from tests.app.embedded_store import minute_apart, stored_run
from tests.app.pipeline_helpers import gpufrag
from tests.kube_fake.objects import T0
from tests.streams.quota_scenarios import (
    CQ_SOLO,
    VQ_SERVE,
    cluster_queue,
    gpu_node,
    gpu_pod,
    local_queue,
    queued,
    volcano_queue,
    workload,
)

RUN = "run-quota-fix"


def _volcano(namespace: str) -> list[list[Envelope]]:
    """serve: deserved = capability = allocated = 4 GPUs, two 2-GPU pods of priority 0
    running in it on an 8-GPU node; then a 2-GPU pod of priority 100 waits in it."""
    q = volcano_queue("serve", deserved=4, capability=4, allocated=4)
    return [
        [
            gpu_node("gpu-1"),
            queued(volcano_queue_from_dict(q)),
            *(
                gpu_pod(f"batch-{i}", namespace, gpus=2, on="gpu-1", queue="serve", priority=0)
                for i in range(2)
            ),
        ],
        [gpu_pod("api-1", "web", gpus=2, queue="serve", priority=100)],
        # a later change, so the pending pods are evaluated again with the pod still held
        [gpu_pod("notebook", "lab", gpus=0, priority=0)],
    ]


def _kueue() -> list[list[Envelope]]:
    """team-a without a cohort, its nominal 4 GPUs used by two 2-GPU pods of priority 0 in
    LocalQueue ml/lq; then a 2-GPU pod of priority 100 (and its Workload) waits in it."""
    cq = cluster_queue("team-a", cohort=None, nominal=4, used=4)
    lq = local_queue("lq", "ml", cluster_queue="team-a")
    wl = workload("pod-infer-1", "ml", queue="lq", gpus=2, admitted=False)
    return [
        [
            gpu_node("gpu-1"),
            queued(cluster_queue_from_dict(cq)),
            queued(local_queue_from_dict(lq)),
            *(
                gpu_pod(f"train-{i}", "ml", gpus=2, on="gpu-1", local_queue="lq", priority=0)
                for i in range(2)
            ),
        ],
        [
            queued(workload_from_dict(wl)),
            gpu_pod("infer-1", "ml", gpus=2, local_queue="lq", priority=100),
        ],
        [gpu_pod("notebook", "lab", gpus=0, priority=0)],
    ]


def _explain(dsn: str, pod: str) -> tuple[str, dict[str, Any]]:
    out = gpufrag(dsn, "explain", pod)
    assert out.returncode == 0, out.stderr
    as_json = gpufrag(dsn, "explain", pod, "--json")
    assert as_json.returncode == 0, as_json.stderr
    return " ".join(out.stdout.split()), json.loads(as_json.stdout)


CASES = {
    "volcano": (lambda: _volcano("batch"), "web/api-1", VQ_SERVE, "batch/batch-0", "volcano"),
    "kueue": (_kueue, "ml/infer-1", CQ_SOLO, "ml/train-0", "kueue"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_pod_its_full_queue_holds_gets_a_proven_quota_reclaim(tmp_path: Path, case: str) -> None:
    steps, pod, queue, victim, system = CASES[case]
    config = GpufragSettings()
    assert config.guardrails.mode == "dry-run"
    dsn = stored_run(tmp_path, minute_apart(steps()), run_id=RUN, config=config)
    text, doc = _explain(dsn, pod)
    # held by its queue, not unplaceable: a node could take it
    assert doc["held_by_quota"] is True and doc["unplaceable"] == 0
    assert doc["quota"]["blocker"] == queue
    (fix,) = doc["fixes"]
    assert (fix["kind"], fix["outcome"], fix["mode"]) == ("quota_reclaim", "proposed", "dry_run")
    assert fix["target"] == victim
    ev = fix["evidence"]
    assert ev["beneficiary"] == pod and ev["queue"] == queue and ev["queue_system"] == system
    assert [v["pod"] for v in ev["victims"]] == [victim]
    whatif = ev["whatif"]
    assert (whatif["placeable_before"], whatif["placeable_after"]) == (False, True)
    assert whatif["placed"] == {pod: "gpu-1"}
    assert whatif["quota"] == {
        "queue": queue,
        "resource": "nvidia.com/gpu",
        "requested": 2.0,
        "limit": 4.0,
        "used_before": 4.0,
        "room_before": 0.0,
        "used_after": 2.0,
        "room_after": 2.0,
    }
    assert doc["no_fix"] is None and "no fix" not in text
    assert (
        f"quota_reclaim at {T0 + timedelta(minutes=1)}: evict {victim} on gpu-1; what-if: "
        "placeable before no, after yes; proposed (dry_run)"
    ) in text, text
    listed = gpufrag(dsn, "actions", "--pod", pod, "--json")
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout)["counts"] == {"quota_reclaim": {"proposed": 1}}


def test_a_full_queue_whose_pods_are_all_protected_says_which_guardrail(tmp_path: Path) -> None:
    config = GpufragSettings()
    assert "kube-system" in config.guardrails.protected_namespaces
    events = minute_apart(_volcano("kube-system"))
    dsn = stored_run(tmp_path, events, run_id=RUN, config=config)
    text, doc = _explain(dsn, "web/api-1")
    assert doc["held_by_quota"] is True and doc["fixes"] == []
    no_fix = doc["no_fix"]
    assert no_fix is not None, text
    (reason,) = no_fix["reasons"]
    assert reason["planner"] == "quota_reclaim"
    assert (reason["code"], reason["guardrail"]) == ("protected_namespace", True)
    assert (reason["pods"], reason["nodes"]) == (2, 1)
    assert (
        "no fix: quota_reclaim: every candidate victim (2 pods on 1 node) is in protected "
        "namespace kube-system (guardrail protected_namespace)"
    ) in text
    assert "when VolcanoQueue:serve's quota_exhausted signal opened" in text
    assert "no plan stored" not in text
