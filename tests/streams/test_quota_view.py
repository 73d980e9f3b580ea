"""The queue view and the quota detector, as scenario tables: real-shaped Kueue ClusterQueues,
LocalQueues and Workloads, Volcano Queues and PodGroups, and ResourceQuotas, mapped by the
watchers' own code (``connectors/kube/queues.py``), with pods and nodes mapped the same way,
through the profile join into the cluster operator one event-time instant at a time. Each
step lists the signals it opens and resolves; a restart from the snapshot after any step gives
the same signals afterwards."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import pytest

from connectors.clickhouse.rows import explanation_row
from connectors.kube.nodes import node_from_kube
from connectors.kube.pods import pod_from_kube
from connectors.kube.queues import (
    cluster_queue_from_dict,
    local_queue_from_dict,
    pod_group_from_dict,
    quota_from_kube,
    volcano_queue_from_dict,
    workload_from_dict,
)
from models import (
    DetectorSettings,
    Envelope,
    NodeEvent,
    PodEvent,
    QueueEvent,
    QueueObject,
    Signal,
)
from models.analysis import BlockReason
from models.settings import UnplaceablePendingSettings
from streams.detectors.cluster import ClusterAnalysis
from streams.instants import Instants
from streams.operator import StateChanges
from streams.profiles.operators import ProfileJoin, ordered_deltas
from tests.kube_fake.objects import T0, node, pod, quota

SETTINGS = DetectorSettings(unplaceable_pending=UnplaceablePendingSettings(evaluate_every_s=0))
GROUP = "scheduling.k8s.io/group-name"
VOLCANO_QUEUE = "scheduling.volcano.sh/queue-name"


# --- real-shaped objects ---------------------------------------------------------------------


def cluster_queue(
    name: str, *, cohort: str, nominal: int, used: int, borrowing: int | None = None
) -> dict[str, Any]:
    gpu: dict[str, Any] = {"name": "nvidia.com/gpu", "nominalQuota": nominal}
    if borrowing is not None:
        gpu["borrowingLimit"] = borrowing
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "ClusterQueue",
        "metadata": {"name": name, "uid": f"cq-{name}"},
        "spec": {
            "cohort": cohort,
            "namespaceSelector": {},
            "queueingStrategy": "BestEffortFIFO",
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                    "flavors": [
                        {
                            "name": "h100",
                            "resources": [
                                {"name": "cpu", "nominalQuota": "512"},
                                {"name": "memory", "nominalQuota": "4Ti"},
                                gpu,
                            ],
                        }
                    ],
                }
            ],
        },
        "status": {
            "pendingWorkloads": 0,
            "admittedWorkloads": 1 if used else 0,
            "flavorsUsage": [
                {
                    "name": "h100",
                    "resources": [
                        {"name": "cpu", "total": "0"},
                        {"name": "nvidia.com/gpu", "total": str(used), "borrowed": "0"},
                    ],
                }
            ],
            "conditions": [{"type": "Active", "status": "True", "reason": "Ready"}],
        },
    }


def local_queue(name: str, namespace: str, *, cluster_queue: str) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterQueue": cluster_queue},
        "status": {"pendingWorkloads": 0, "admittedWorkloads": 0},
    }


def workload(name: str, namespace: str, *, queue: str, gpus: int, admitted: bool) -> dict[str, Any]:
    conditions = [
        {"type": "QuotaReserved", "status": "True" if admitted else "False", "reason": "Pending"},
        {"type": "Admitted", "status": "True" if admitted else "False"},
    ]
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "queueName": queue,
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "trainer",
                                    "resources": {
                                        "requests": {"cpu": "8", "nvidia.com/gpu": str(gpus)}
                                    },
                                }
                            ]
                        }
                    },
                }
            ],
        },
        "status": {"conditions": conditions},
    }


def volcano_queue(name: str, *, deserved: int, capability: int, allocated: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {
            "weight": 1,
            "reclaimable": True,
            "guarantee": {"resource": {"nvidia.com/gpu": "2"}},
            "deserved": {"nvidia.com/gpu": str(deserved), "cpu": "64"},
            "capability": {"nvidia.com/gpu": str(capability), "cpu": "256"},
        },
        "status": {
            "state": "Open",
            "pending": 0,
            "running": 1,
            "allocated": {"nvidia.com/gpu": str(allocated), "cpu": "16"},
        },
    }


def pod_group(name: str, namespace: str, *, queue: str, members: int, gpus: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "minMember": members,
            "queue": queue,
            "minResources": {"nvidia.com/gpu": str(members * gpus), "cpu": str(8 * members)},
        },
        "status": {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "Unschedulable",
                    "status": "True",
                    "reason": "NotEnoughResources",
                    "message": f"{members}/{members} tasks in gang unschedulable: pod group is "
                    "not ready, 2 Pending, 2 minAvailable; queue resource quota insufficient",
                }
            ],
        },
    }


# --- events ----------------------------------------------------------------------------------


def queued(obj: QueueObject | None, *, delete: QueueObject | None = None) -> Envelope:
    target = obj if obj is not None else delete
    assert target is not None
    change = "upsert" if obj is not None else "delete"
    return Envelope.wrap(QueueEvent(change=change, queue=target), event_time=T0, source="kube")


def gpu_node(name: str) -> Envelope:
    n = node_from_kube(node(name, gpus=8), pool_label=None, now=T0)
    return Envelope.wrap(NodeEvent(change="upsert", node=n), event_time=T0, source="kube")


def gpu_pod(
    name: str,
    namespace: str,
    *,
    gpus: int,
    on: str | None = None,
    queue: str | None = None,
    gang: tuple[str, int] | None = None,
    delete: bool = False,
) -> Envelope:
    notes = {}
    if queue is not None:
        notes[VOLCANO_QUEUE] = queue
    if gang is not None:
        notes[GROUP] = gang[0]
    raw = pod(
        name,
        namespace,
        gpus=gpus,
        node=on,
        phase="Running" if on else "Pending",
        annotations=notes or None,
        scheduler_name="volcano" if queue else None,
    )
    size = None if gang is None else gang[1]
    p = pod_from_kube(raw, gangs=lambda ns, g: size, now=T0)
    change = "delete" if delete else "upsert"
    return Envelope.wrap(PodEvent(change=change, pod=p), event_time=T0, source="kube")


# --- the table runner ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Step:
    events: list[Envelope]
    opens: set[tuple[str, str]] = field(default_factory=set)
    resolves: set[tuple[str, str]] = field(default_factory=set)


@dataclass(slots=True)
class Run:
    """The join and the cluster operator in a plain loop, one instant per step, the cluster
    operator's snapshot entries kept as a Faust table would keep them."""

    join: ProfileJoin = field(default_factory=ProfileJoin)
    analysis: ClusterAnalysis = field(default_factory=lambda: _analysis({}))
    instants: Instants[Any, Signal] = field(init=False)
    table: dict[str, bytes] = field(default_factory=dict)
    seq: int = 0

    def __post_init__(self) -> None:
        self.instants = Instants(self.analysis)

    def step(self, at: datetime, events: list[Envelope]) -> list[Signal]:
        for env in events:
            env = env.model_copy(update={"event_time": at, "seq": self.seq})
            self.seq += 1
            for key, u in ordered_deltas(env, self.join.apply(env)):
                self.instants.add(key, u)
        out = [o for o in self.instants.release(at) if isinstance(o, Signal)]
        _keep(self.table, self.analysis.snapshot())
        return out

    def restart(self) -> None:
        """A new cluster operator from the table, as a restarted worker rebuilds its view."""
        watermark = self.instants.watermark
        self.analysis = _analysis(self.table)
        self.instants = Instants(self.analysis)
        self.instants.watermark = watermark


def _analysis(entries: dict[str, bytes]) -> ClusterAnalysis:
    a = ClusterAnalysis(detectors=SETTINGS)
    a.restore(entries)  # from here on it records its changes, as the worker's does
    return a


def _keep(table: dict[str, bytes], changes: StateChanges) -> None:
    for k, v in changes.items():
        if v is None:
            table.pop(k, None)
        else:
            table[k] = v


def play(steps: list[Step], *, restart_after: int | None = None) -> list[list[Signal]]:
    run = Run()
    out = []
    for n, s in enumerate(steps):
        out.append(run.step(T0 + timedelta(seconds=10 * n), s.events))
        if n == restart_after:
            run.restart()
    return out


def check(steps: list[Step]) -> list[list[Signal]]:
    got = play(steps)
    for n, (s, signals) in enumerate(zip(steps, got, strict=True)):
        opened = {(x.kind.value, x.scope_id) for x in signals if x.state == "open"}
        resolved = {(x.kind.value, x.scope_id) for x in signals if x.state == "resolved"}
        assert (opened, resolved) == (s.opens, s.resolves), f"step {n}"
    for k in range(len(steps) - 1):
        assert play(steps, restart_after=k)[k + 1 :] == got[k + 1 :], f"restart after {k}"
    return got


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


VQ_PROD = "VolcanoQueue:prod"


def borrower_steps() -> list[Step]:
    """Volcano: research borrows 6 of prod's deserved GPUs while prod's gang waits."""
    research = [
        gpu_pod(f"research-{i}", "research", gpus=2, on=f"gpu-{i % 3}", queue="research")
        for i in range(7)
    ]
    gang = [
        gpu_pod(f"prod-w{i}", "prod", gpus=2, queue="prod", gang=("llm-serve", 2)) for i in range(2)
    ]
    return [
        Step([gpu_node(f"gpu-{i}") for i in range(3)]),
        Step(
            [
                queued(
                    volcano_queue_from_dict(
                        volcano_queue("research", deserved=8, capability=16, allocated=14)
                    )
                ),
                queued(
                    volcano_queue_from_dict(
                        volcano_queue("prod", deserved=8, capability=8, allocated=2)
                    )
                ),
                *research,
                gpu_pod("prod-api", "prod", gpus=2, on="gpu-2", queue="prod"),
            ]
        ),
        # prod wants 4 of its 6 unused GPUs back, but research borrows 6 of them
        Step(
            [
                queued(
                    pod_group_from_dict(
                        pod_group("llm-serve", "prod", queue="prod", members=2, gpus=2)
                    )
                ),
                *gang,
            ],
            opens={("quota_lender_blocked", VQ_PROD)},
        ),
        # research finishes three pods: 6 GPUs free in the cohort, enough for prod's gang
        Step(
            [
                *(
                    gpu_pod(
                        f"research-{i}",
                        "research",
                        gpus=2,
                        on=f"gpu-{i % 3}",
                        queue="research",
                        delete=True,
                    )
                    for i in range(3)
                ),
                queued(
                    volcano_queue_from_dict(
                        volcano_queue("research", deserved=8, capability=16, allocated=8)
                    )
                ),
            ],
            resolves={("quota_lender_blocked", VQ_PROD)},
        ),
    ]


def test_a_borrower_blocks_a_lenders_pending_work() -> None:
    got = check(borrower_steps())
    opened = got[2][0]
    assert opened.evidence["borrowers"] == {"VolcanoQueue:research": 6.0}
    assert opened.evidence["blocked"] == 4.0
    assert opened.evidence["pending"] == {"nvidia.com/gpu": 4.0}


def exhausted_steps() -> list[Step]:
    """Namespace nlp uses all 8 GPUs of its ResourceQuota while a pod asks for 2 more."""
    hard = {"requests.nvidia.com/gpu": "8", "requests.cpu": "256", "pods": "50"}
    full = quota_from_kube(quota("gpu", "nlp", hard=hard, used={"requests.nvidia.com/gpu": "8"}))
    freed = quota_from_kube(quota("gpu", "nlp", hard=hard, used={"requests.nvidia.com/gpu": "4"}))
    return [
        Step(
            [
                gpu_node("gpu-1"),
                gpu_node("gpu-2"),
                gpu_pod("train-0", "nlp", gpus=4, on="gpu-1"),
                gpu_pod("train-1", "nlp", gpus=4, on="gpu-2"),
                queued(full),
            ]
        ),
        Step(
            [gpu_pod("finetune", "nlp", gpus=2), gpu_pod("notebook", "lab", gpus=1)],
            opens={("quota_exhausted", "nlp")},
        ),
        Step(
            [gpu_pod("train-1", "nlp", gpus=4, on="gpu-2", delete=True), queued(freed)],
            resolves={("quota_exhausted", "nlp")},
        ),
    ]


def test_an_exhausted_resource_quota_blocks_gpu_pods_and_says_so_in_explanations() -> None:
    steps = exhausted_steps()
    check(steps)
    run = Run()
    for n, s in enumerate(steps[:2]):
        run.step(T0 + timedelta(seconds=10 * n), s.events)
    exp = run.analysis.explanations
    blocked = exp["nlp/finetune"]
    assert blocked.quota == ("ResourceQuota:nlp/gpu",)
    assert blocked.blocking[0] == (BlockReason.QUOTA, 2)  # on both nodes, which have room
    assert blocked.fits_some_node and not blocked.unplaceable
    assert not exp["lab/notebook"].quota  # no quota in its namespace
    task = run.analysis.view.tasks["nlp/finetune"]
    row = explanation_row("run-1", "nlp/finetune", blocked, task, T0)
    reasons = row["reasons"]
    assert isinstance(reasons, dict) and reasons["quota"] == 2  # the Map column as it is
    run.step(T0 + timedelta(seconds=20), steps[2].events)
    assert not run.analysis.explanations["nlp/finetune"].quota


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
