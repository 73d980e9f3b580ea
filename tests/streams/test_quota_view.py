"""The queue view and the quota detector, as scenario tables: real-shaped Kueue ClusterQueues,
LocalQueues and Workloads, Volcano Queues and PodGroups, and ResourceQuotas, mapped by the
watchers' own code (``connectors/kube/watch/queue_objects.py``), with pods and nodes mapped the
same way, through the profile join into the cluster operator one event-time instant at a time. Each
step lists the signals it opens and resolves; a restart from the snapshot after any step gives
the same signals afterwards."""

from __future__ import annotations

from datetime import timedelta

import pytest

from connectors.clickhouse.rows import explanation_row
from connectors.kube.watch.queue_objects import (
    cluster_queue_from_dict,
    local_queue_from_dict,
    volcano_queue_from_dict,
    workload_from_dict,
)
from models import Scope, SignalKind
from models.analysis import BlockReason, QuotaBlock
from streams.cluster_analysis import ClusterAnalysis
from tests.kube_fake.objects import T0
from tests.streams.quota_scenarios import (
    CQ_SOLO,
    VQ_PROD,
    VQ_SERVE,
    Step,
    borrower_steps,
    cluster_queue,
    exhausted_steps,
    full_cluster_queue_steps,
    full_volcano_steps,
    gpu_node,
    gpu_pod,
    local_queue,
    queued,
    volcano_queue,
    workload,
)
from tests.streams.quota_table import SETTINGS, Run, check

# --- scenarios -------------------------------------------------------------------------------

CQ_A = "ClusterQueue:team-a"
CQ_B = "ClusterQueue:team-b"


def test_a_queue_with_pending_work_and_an_idle_lender_in_its_cohort() -> None:
    lender = cluster_queue_from_dict(cluster_queue("team-a", cohort="research", nominal=16, used=0))
    full = cluster_queue("team-b", cohort="research", nominal=8, used=8, borrowing=4)
    lq = local_queue_from_dict(local_queue("vision", "vision", cluster_queue="team-b"))
    waiting = workload("job-sweep-7-3f2a1", "vision", queue="vision", gpus=6, admitted=False)
    admitted = workload("job-sweep-7-3f2a1", "vision", queue="vision", gpus=6, admitted=True)
    steps = [
        Step([gpu_node("gpu-1"), gpu_node("gpu-2"), queued(lender), queued(lq)]),
        # team-b is at its quota and its Workload waits: team-a's 16 GPUs sit idle
        Step(
            [queued(cluster_queue_from_dict(full)), queued(workload_from_dict(waiting))],
            opens={("quota_borrowable", CQ_B)},
        ),
        # nothing about the queues changes: the signal stays, nothing new
        Step([gpu_pod("other", "misc", gpus=1, on="gpu-2")]),
        # Kueue admits it by borrowing 6: nothing waits any more
        Step(
            [
                queued(workload_from_dict(admitted)),
                queued(
                    cluster_queue_from_dict(
                        cluster_queue("team-b", cohort="research", nominal=8, used=14, borrowing=8)
                    )
                ),
            ],
            resolves={("quota_borrowable", CQ_B)},
        ),
    ]
    got = check(steps)
    opened = got[1][0]
    assert opened.evidence["lenders"] == {CQ_A: 16.0}
    assert opened.evidence["pending"] == {"nvidia.com/gpu": 6.0}
    assert opened.evidence["borrowing_limit_left"] == 4.0  # its limit allows 4 of the 6
    assert opened.evidence["borrowable"] == 4.0


def test_a_borrower_blocks_a_lenders_pending_work() -> None:
    got = check(borrower_steps())
    opened = got[2][0]
    assert opened.evidence["borrowers"] == {"VolcanoQueue:research": 6.0}
    assert opened.evidence["blocked"] == 4.0
    assert opened.evidence["pending"] == {"nvidia.com/gpu": 4.0}


def test_an_exhausted_resource_quota_opens_for_waiting_work_not_for_pods_it_let_in() -> None:
    steps = exhausted_steps()
    got = check(steps)
    opened = got[1][0]
    quota = opened.evidence["quotas"]["ResourceQuota:nlp/gpu"]  # type: ignore[index]
    assert quota["used"] == {"nvidia.com/gpu": 8.0}
    assert quota["pending"] == {"nvidia.com/gpu": 2.0}  # the Workload's, no pod counted twice
    run = Run()
    for n, s in enumerate(steps[:2]):
        run.step(T0 + timedelta(seconds=10 * n), s.events)
    # a pending pod that exists was charged to the quota when it was created (the API server
    # refuses one over the limit): with 6 of 8 bound and it asking 2, the quota let it in
    extra = [gpu_pod("finetune", "nlp", gpus=2)]
    run.step(T0 + timedelta(seconds=15), extra)
    assert not run.analysis.explanations["nlp/finetune"].quota


def test_a_full_queue_names_itself_in_its_pending_pods_explanations() -> None:
    full = volcano_queue_from_dict(volcano_queue("serve", capability=4, deserved=4, allocated=4))
    run = Run()
    run.step(T0, [gpu_node("gpu-1"), queued(full)])
    run.step(
        T0 + timedelta(seconds=10), [gpu_pod("api-0", "web", gpus=4, on="gpu-1", queue="serve")]
    )
    run.step(T0 + timedelta(seconds=20), [gpu_pod("api-1", "web", gpus=2, queue="serve")])
    blocked = run.analysis.explanations["web/api-1"]
    assert blocked.quota == ("VolcanoQueue:serve",)
    assert blocked.blocking[0] == (BlockReason.QUOTA, 1)
    assert blocked.fits_some_node  # the node has room: the queue does not
    task = run.analysis.view.tasks["web/api-1"]
    row = explanation_row("run-1", "web/api-1", blocked, task, T0)
    reasons = row["reasons"]
    assert isinstance(reasons, dict) and reasons["quota"] == 1  # the Map column as it is


def test_a_queue_object_removed_takes_its_signal_with_it() -> None:
    lender = cluster_queue_from_dict(cluster_queue("team-a", cohort="research", nominal=16, used=0))
    full = cluster_queue_from_dict(cluster_queue("team-b", cohort="research", nominal=8, used=8))
    lq = local_queue_from_dict(local_queue("vision", "vision", cluster_queue="team-b"))
    waiting = workload_from_dict(
        workload("job-a-1", "vision", queue="vision", gpus=2, admitted=False)
    )
    check(
        [
            Step(
                [queued(lender), queued(full), queued(lq), queued(waiting)],
                opens={("quota_borrowable", CQ_B)},
            ),
            Step([queued(None, delete=lender)], resolves={("quota_borrowable", CQ_B)}),
        ]
    )


@pytest.mark.parametrize("enabled", [True, False])
def test_the_detector_has_its_switch(enabled: bool) -> None:
    settings = SETTINGS.model_copy(
        update={"quota": SETTINGS.quota.model_copy(update={"enabled": enabled})}
    )
    a = ClusterAnalysis(detectors=settings)
    assert any(d.name == "quota" for d in a.detectors) is enabled


# --- a full queue: no cohort to borrow from, or at its own ceiling ----------------------------


def test_a_full_volcano_queue_opens_quota_exhausted_and_resolves_when_the_work_is_admitted() -> (
    None
):
    got = check(full_volcano_steps())
    opened = got[1][0]
    assert (opened.scope, opened.severity) == (Scope.QUEUE, "warning")
    assert opened.evidence["used"] == {"nvidia.com/gpu": 4.0}
    assert opened.evidence["pending"] == {"nvidia.com/gpu": 2.0}
    assert (opened.evidence["ceiling"], opened.evidence["room"]) == (4.0, 0.0)
    assert "4 of 4 used (deserved 4, capability 4)" in opened.summary
    assert got[2][0].fingerprint == opened.fingerprint


def test_a_full_volcano_queue_resolves_when_it_has_room_again() -> None:
    full = volcano_queue_from_dict(volcano_queue("serve", deserved=4, capability=4, allocated=0))
    steps = full_volcano_steps()[:2]
    ended = gpu_pod("api-0", "web", gpus=4, on="gpu-1", queue="serve", delete=True)
    check([*steps, Step([ended, queued(full)], resolves={("quota_exhausted", VQ_SERVE)})])


def test_a_full_queue_names_itself_and_its_figures_in_the_pods_explanation() -> None:
    run = Run()
    for n, s in enumerate(full_volcano_steps()[:2]):
        run.step(T0 + timedelta(seconds=10 * n), s.events)
    exp = run.analysis.explanations["web/api-1"]
    assert exp.fits_some_node and exp.quota == (VQ_SERVE,)
    figures = QuotaBlock(VQ_SERVE, "nvidia.com/gpu", 2.0, 4.0, 4.0, 4.0, 0.0)
    assert exp.quota_blocks == (figures,)
    row = explanation_row("r", "web/api-1", exp, run.analysis.view.tasks["web/api-1"], T0)
    assert (row["quota_blocker"], row["quota_used"], row["quota_limit"]) == (VQ_SERVE, 4.0, 4.0)


def test_a_full_cluster_queue_without_a_cohort_opens_quota_exhausted() -> None:
    got = check(full_cluster_queue_steps())
    opened = got[1][0]
    assert opened.scope == Scope.QUEUE and opened.evidence["cohort"] is None
    assert opened.evidence["pending"] == {"nvidia.com/gpu": 2.0}  # the pod and its Workload: once
    assert "4 of 4 used (nominal quota 4, no cohort to borrow from)" in opened.summary
    run = Run()
    for n, s in enumerate(full_cluster_queue_steps()[:2]):
        run.step(T0 + timedelta(seconds=10 * n), s.events)
    block = run.analysis.explanations["ml/infer-1"].quota_blocks
    assert block == (QuotaBlock(CQ_SOLO, "nvidia.com/gpu", 2.0, 4.0, 4.0, 4.0, 0.0),)


def test_cohort_and_namespace_findings_are_as_before() -> None:
    """Borrowing and ResourceQuota scenarios open exactly what they did (``check`` holds each
    step to its set), with the fingerprints the previous release gave them, and a queue that
    may borrow is never called full."""
    fingerprints = {
        (s.kind, s.scope_id): s.fingerprint
        for steps in (borrower_steps(), exhausted_steps())
        for signals in check(steps)
        for s in signals
    }
    assert fingerprints == {
        (SignalKind.QUOTA_LENDER_BLOCKED, VQ_PROD): "4b2042824e8455fc",
        (SignalKind.QUOTA_EXHAUSTED, "nlp"): "ec417a54e77521f3",
    }
