"""Real-shaped quota and queue objects (Kueue ClusterQueue, LocalQueue, Workload; Volcano Queue,
PodGroup; ResourceQuota) as the watchers map them, the pods and nodes around them, and the
quota scenarios as steps: shared by the queue view's tests and the Kafka worker's."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kubernetes_asyncio.client import CoreV1Event, V1EventSource, V1ObjectMeta, V1ObjectReference

from connectors.kube.watch.nodes import node_from_kube
from connectors.kube.watch.pods import pod_from_kube
from connectors.kube.watch.queue_objects import (
    cluster_queue_from_dict,
    local_queue_from_dict,
    pod_group_from_dict,
    quota_from_kube,
    volcano_queue_from_dict,
    workload_from_dict,
)
from connectors.kube.watch.scheduling import scheduler_event
from models import Envelope, NodeEvent, PodEvent, QueueEvent, QueueObject, SchedulingEvent
from tests.kube_fake.objects import T0, node, pod, quota

__all__ = [
    "CQ_SOLO",
    "VQ_PROD",
    "VQ_SERVE",
    "Step",
    "borrower_steps",
    "cluster_queue",
    "exhausted_steps",
    "failed_create",
    "full_cluster_queue_steps",
    "full_volcano_steps",
    "gpu_node",
    "gpu_pod",
    "local_queue",
    "queued",
    "refusal_steps",
    "refused",
    "workload",
]

GROUP = "scheduling.k8s.io/group-name"
VOLCANO_QUEUE = "scheduling.volcano.sh/queue-name"
KUEUE_QUEUE = "kueue.x-k8s.io/queue-name"
VQ_PROD = "VolcanoQueue:prod"
VQ_SERVE = "VolcanoQueue:serve"
CQ_SOLO = "ClusterQueue:team-a"

# --- real-shaped objects ---------------------------------------------------------------------


def cluster_queue(
    name: str, *, cohort: str | None, nominal: int, used: int, borrowing: int | None = None
) -> dict[str, Any]:
    gpu: dict[str, Any] = {"name": "nvidia.com/gpu", "nominalQuota": nominal}
    if borrowing is not None:
        gpu["borrowingLimit"] = borrowing
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "ClusterQueue",
        "metadata": {"name": name, "uid": f"cq-{name}"},
        "spec": {
            **({} if cohort is None else {"cohort": cohort}),
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


def gpu_node(name: str, gpus: int = 8) -> Envelope:
    n = node_from_kube(node(name, gpus=gpus), pool_label=None, now=T0)
    return Envelope.wrap(NodeEvent(change="upsert", node=n), event_time=T0, source="kube")


def gpu_pod(
    name: str,
    namespace: str,
    *,
    gpus: int,
    on: str | None = None,
    queue: str | None = None,
    local_queue: str | None = None,
    gang: tuple[str, int] | None = None,
    delete: bool = False,
    priority: int | None = None,
) -> Envelope:
    """A GPU pod, in a Volcano ``queue`` or a Kueue ``local_queue`` (by its label)."""
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
        labels=None if local_queue is None else {KUEUE_QUEUE: local_queue},
        scheduler_name="volcano" if queue else None,
        priority=priority,
    )
    size = None if gang is None else gang[1]
    p = pod_from_kube(raw, gangs=lambda ns, g: size, now=T0)
    change = "delete" if delete else "upsert"
    return Envelope.wrap(PodEvent(change=change, pod=p), event_time=T0, source="kube")


@dataclass(frozen=True, slots=True)
class Step:
    events: list[Envelope]
    opens: set[tuple[str, str]] = field(default_factory=set)
    resolves: set[tuple[str, str]] = field(default_factory=set)


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


def exhausted_steps() -> list[Step]:
    """Namespace nlp uses all 8 GPUs of its ResourceQuota while a Kueue Workload (a suspended
    Job, no pods yet) asks for 2 more; a pending pod that exists was let in by the quota, so
    it is the Workload that waits on it."""
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
            [
                queued(
                    workload_from_dict(
                        workload("sweep", "nlp", queue="nlp", gpus=2, admitted=False)
                    )
                ),
                gpu_pod("notebook", "lab", gpus=1),
            ],
            opens={("quota_exhausted", "nlp")},
        ),
        Step(
            [gpu_pod("train-1", "nlp", gpus=4, on="gpu-2", delete=True), queued(freed)],
            resolves={("quota_exhausted", "nlp")},
        ),
    ]


def full_volcano_steps() -> list[Step]:
    """Volcano queue serve at its capability (deserved = capability = allocated = 4 GPUs), a
    2-GPU pod waiting in it on a node with 4 GPUs free; then the running pod ends and the
    waiting one is admitted."""

    def serve(allocated: int) -> Envelope:
        q = volcano_queue("serve", deserved=4, capability=4, allocated=allocated)
        return queued(volcano_queue_from_dict(q))

    return [
        Step(
            [
                gpu_node("gpu-1"),
                serve(4),
                gpu_pod("api-0", "web", gpus=4, on="gpu-1", queue="serve"),
            ]
        ),
        Step(
            [gpu_pod("api-1", "web", gpus=2, queue="serve")], opens={("quota_exhausted", VQ_SERVE)}
        ),
        Step(
            [
                gpu_pod("api-0", "web", gpus=4, on="gpu-1", queue="serve", delete=True),
                serve(2),
                gpu_pod("api-1", "web", gpus=2, on="gpu-1", queue="serve"),
            ],
            resolves={("quota_exhausted", VQ_SERVE)},
        ),
    ]


def full_cluster_queue_steps() -> list[Step]:
    """Kueue ClusterQueue team-a without a cohort, its nominal 4 GPUs in use, a 2-GPU pod (and
    its Workload) waiting in LocalQueue ml/lq on a node with room; then the running pod ends and
    Kueue admits the waiting one."""

    def team_a(used: int) -> Envelope:
        cq = cluster_queue("team-a", cohort=None, nominal=4, used=used)
        return queued(cluster_queue_from_dict(cq))

    def sweep(*, admitted: bool) -> Envelope:
        w = workload("pod-infer-1", "ml", queue="lq", gpus=2, admitted=admitted)
        return queued(workload_from_dict(w))

    lq = local_queue_from_dict(local_queue("lq", "ml", cluster_queue="team-a"))
    return [
        Step(
            [
                gpu_node("gpu-1"),
                team_a(4),
                queued(lq),
                gpu_pod("train-0", "ml", gpus=4, on="gpu-1", local_queue="lq"),
            ]
        ),
        Step(
            [sweep(admitted=False), gpu_pod("infer-1", "ml", gpus=2, local_queue="lq")],
            opens={("quota_exhausted", CQ_SOLO)},
        ),
        Step(
            [
                gpu_pod("train-0", "ml", gpus=4, on="gpu-1", local_queue="lq", delete=True),
                team_a(2),
                sweep(admitted=True),
                gpu_pod("infer-1", "ml", gpus=2, on="gpu-1", local_queue="lq"),
            ],
            resolves={("quota_exhausted", CQ_SOLO)},
        ),
    ]


def refused(
    owner: str,
    namespace: str,
    *,
    message: str,
    kind: str = "Job",
    count: int = 1,
) -> Envelope:
    """The controller's FailedCreate Event on its owner, mapped by the watcher's own code."""
    event = scheduler_event(
        failed_create(owner, namespace, message=message, kind=kind, count=count), count=count
    )
    return Envelope.wrap(SchedulingEvent(event=event), event_time=T0, source="kube")


def failed_create(
    owner: str, namespace: str, *, message: str, kind: str = "Job", count: int = 1
) -> CoreV1Event:
    """The controller's FailedCreate Event on its owner, as the Job controller records it
    (k8s.io/kubernetes controller_utils: ``Error creating: <the API server's error>``)."""
    return CoreV1Event(
        api_version="v1",
        kind="Event",
        metadata=V1ObjectMeta(name=f"{owner}.1812a3b4c5d6e7f8", namespace=namespace),
        involved_object=V1ObjectReference(
            api_version="batch/v1", kind=kind, namespace=namespace, name=owner, uid=f"uid-{owner}"
        ),
        reason="FailedCreate",
        message=message,
        count=count,
        first_timestamp=T0,
        last_timestamp=T0,
        type="Warning",
        source=V1EventSource(component="job-controller"),
    )


def gpu_refusal(pod: str, *, used: int = 2, limited: int = 2, quota: str = "gpu") -> str:
    return (
        f'Error creating: pods "{pod}" is forbidden: exceeded quota: {quota}, requested: '
        f"requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu={used}, limited: "
        f"requests.nvidia.com/gpu={limited}"
    )


def refusal_steps() -> list[Step]:
    """Namespace vision's ResourceQuota allows 2 GPUs; Job train asks for 4 pods of 1 GPU: two
    run, the Job controller's third and fourth are refused (FailedCreate on the Job, no pod);
    then the quota is raised to 4, which admits what was refused."""

    def gpu_quota(hard: int) -> Envelope:
        limits = {"requests.nvidia.com/gpu": str(hard), "requests.cpu": "64"}
        q = quota("gpu", "vision", hard=limits, used={"requests.nvidia.com/gpu": "2"})
        return queued(quota_from_kube(q))

    return [
        Step(
            [
                gpu_node("gpu-7"),
                gpu_quota(2),
                gpu_pod("train-a1b2c", "vision", gpus=1, on="gpu-7"),
                gpu_pod("train-d3e4f", "vision", gpus=1, on="gpu-7"),
            ]
        ),
        Step(
            [refused("train", "vision", message=gpu_refusal("train-g5h6i"), count=2)],
            opens={("quota_exhausted", "vision")},
        ),
        # the same refusal again (the next try): still open, nothing new
        Step([refused("train", "vision", message=gpu_refusal("train-j7k8l"))]),
        Step([gpu_quota(4)], resolves={("quota_exhausted", "vision")}),
    ]
