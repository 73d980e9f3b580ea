"""Builders of Kubernetes objects from kubernetes-asyncio's models, so tests state what differs
(a GPU request, a gang label, an OOM kill) and the rest is a plausible object. Kueue and
Volcano objects are dicts: kubernetes-asyncio has no models for custom resources."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from kubernetes_asyncio.client import (
    CoreV1Event,
    V1Container,
    V1ContainerState,
    V1ContainerStateTerminated,
    V1ContainerStatus,
    V1EventSource,
    V1Node,
    V1NodeSpec,
    V1NodeStatus,
    V1ObjectMeta,
    V1ObjectReference,
    V1OwnerReference,
    V1Pod,
    V1PodSpec,
    V1PodStatus,
    V1ResourceQuota,
    V1ResourceQuotaSpec,
    V1ResourceQuotaStatus,
    V1ResourceRequirements,
    V1Taint,
    V1Toleration,
)

__all__ = [
    "T0",
    "cluster_queue",
    "container",
    "event",
    "node",
    "oom_status",
    "pod",
    "pod_group",
    "quota",
    "volcano_queue",
]

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


def container(
    name: str = "main",
    *,
    requests: dict[str, str] | None = None,
    limits: dict[str, str] | None = None,
    restart_policy: str | None = None,
) -> V1Container:
    return V1Container(
        name=name,
        image="registry.example/train:1",
        resources=V1ResourceRequirements(requests=requests, limits=limits),
        restart_policy=restart_policy,
    )


def pod(
    name: str,
    namespace: str = "ml",
    *,
    containers: list[V1Container] | None = None,
    init_containers: list[V1Container] | None = None,
    gpus: int | None = None,
    node: str | None = None,
    phase: str = "Pending",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    priority: int | None = None,
    tolerations: list[V1Toleration] | None = None,
    owner: tuple[str, str] | None = None,
    overhead: dict[str, str] | None = None,
    container_statuses: list[V1ContainerStatus] | None = None,
    node_selector: dict[str, str] | None = None,
    scheduler_name: str | None = None,
) -> V1Pod:
    if containers is None:
        requests = {"cpu": "2", "memory": "4Gi"}
        if gpus:
            requests["nvidia.com/gpu"] = str(gpus)
        containers = [container(requests=requests, limits=dict(requests))]
    owners = None
    if owner is not None:
        owners = [
            V1OwnerReference(
                api_version="batch/v1",
                kind=owner[0],
                name=owner[1],
                uid="owner-uid",
                controller=True,
            )
        ]
    return V1Pod(
        api_version="v1",
        kind="Pod",
        metadata=V1ObjectMeta(
            name=name,
            namespace=namespace,
            labels=labels,
            annotations=annotations,
            owner_references=owners,
            creation_timestamp=T0,
        ),
        spec=V1PodSpec(
            containers=containers,
            init_containers=init_containers,
            node_name=node,
            priority=priority,
            tolerations=tolerations,
            overhead=overhead,
            node_selector=node_selector,
            scheduler_name=scheduler_name,
        ),
        status=V1PodStatus(
            phase=phase, qos_class="Guaranteed", container_statuses=container_statuses
        ),
    )


def oom_status(
    name: str = "main",
    *,
    restarts: int,
    finished: datetime,
    container_id: str,
    current: bool = False,
) -> V1ContainerStatus:
    """A container status whose last (or, with ``current``, present) state is an OOM kill."""
    killed = V1ContainerState(
        terminated=V1ContainerStateTerminated(
            exit_code=137,
            reason="OOMKilled",
            finished_at=finished,
            started_at=T0,
            container_id=container_id,
        )
    )
    running = V1ContainerState()
    return V1ContainerStatus(
        name=name,
        image="registry.example/train:1",
        image_id="sha256:abc",
        ready=not current,
        restart_count=restarts,
        state=killed if current else running,
        last_state=None if current else killed,
    )


def node(
    name: str,
    *,
    gpus: int = 8,
    product: str | None = "NVIDIA-H100-80GB-HBM3",
    cpu: str = "96",
    memory: str = "1024Gi",
    labels: dict[str, str] | None = None,
    allocatable: dict[str, str] | None = None,
    taints: list[V1Taint] | None = None,
    unschedulable: bool | None = None,
    annotations: dict[str, str] | None = None,
) -> V1Node:
    all_labels = {"kubernetes.io/hostname": name, **(labels or {})}
    if product is not None and gpus:
        all_labels.setdefault("nvidia.com/gpu.product", product)
        all_labels.setdefault("nvidia.com/gpu.count", str(gpus))
    resources = {"cpu": cpu, "memory": memory, "pods": "110"}
    if gpus:
        resources["nvidia.com/gpu"] = str(gpus)
    resources.update(allocatable or {})
    return V1Node(
        api_version="v1",
        kind="Node",
        metadata=V1ObjectMeta(
            name=name, labels=all_labels, annotations=annotations, creation_timestamp=T0
        ),
        spec=V1NodeSpec(taints=taints, unschedulable=unschedulable),
        status=V1NodeStatus(capacity=dict(resources), allocatable=resources),
    )


def event(
    name: str,
    *,
    reason: str,
    message: str,
    pod: str | None = None,
    namespace: str = "ml",
    node: str | None = None,
    count: int = 1,
    last: datetime = T0,
    source_host: str | None = None,
) -> CoreV1Event:
    if pod is not None:
        involved = V1ObjectReference(kind="Pod", namespace=namespace, name=pod, uid=f"uid-{pod}")
    else:
        involved = V1ObjectReference(kind="Node", name=node, uid=f"uid-{node}")
    return CoreV1Event(
        api_version="v1",
        kind="Event",
        metadata=V1ObjectMeta(name=name, namespace=namespace if pod else "default"),
        involved_object=involved,
        reason=reason,
        message=message,
        count=count,
        first_timestamp=T0,
        last_timestamp=last,
        type="Warning",
        source=V1EventSource(component="kube-scheduler", host=source_host),
    )


def quota(
    name: str, namespace: str, *, hard: dict[str, str], used: dict[str, str] | None = None
) -> V1ResourceQuota:
    return V1ResourceQuota(
        api_version="v1",
        kind="ResourceQuota",
        metadata=V1ObjectMeta(name=name, namespace=namespace),
        spec=V1ResourceQuotaSpec(hard=hard),
        status=V1ResourceQuotaStatus(hard=hard, used=used or {}),
    )


def cluster_queue(
    name: str, *, gpus: int, borrowing: int | None = None, cohort: str | None = None
) -> dict[str, Any]:
    resource: dict[str, Any] = {"name": "nvidia.com/gpu", "nominalQuota": gpus}
    if borrowing is not None:
        resource["borrowingLimit"] = borrowing
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "cohort": cohort,
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "nvidia.com/gpu"],
                    "flavors": [
                        {
                            "name": "h100",
                            "resources": [{"name": "cpu", "nominalQuota": "512"}, resource],
                        }
                    ],
                }
            ],
        },
        "status": {
            "pendingWorkloads": 2,
            "admittedWorkloads": 1,
            "flavorsUsage": [
                {"name": "h100", "resources": [{"name": "nvidia.com/gpu", "total": "4"}]}
            ],
            "conditions": [{"type": "Active", "status": "True"}],
        },
    }


def pod_group(
    name: str, namespace: str, *, min_member: int, queue: str = "default"
) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "minMember": min_member,
            "queue": queue,
            "minResources": {"nvidia.com/gpu": str(min_member), "cpu": "8"},
        },
        "status": {"phase": "Pending"},
    }


def volcano_queue(name: str, *, deserved: int, capability: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {
            "weight": 1,
            "deserved": {"nvidia.com/gpu": str(deserved), "cpu": "64"},
            "capability": {"nvidia.com/gpu": str(capability)},
        },
        "status": {
            "state": "Open",
            "pending": 1,
            "running": 3,
            "allocated": {"nvidia.com/gpu": "6"},
        },
    }
