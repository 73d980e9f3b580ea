"""The bundled trace's nodes and pods as the Kubernetes objects a HAMi cluster would hold.

A trace pod's share of one card (milli-GPU) is HAMi's ``nvidia.com/gpucores`` (percent) with the
same share of the card's memory (``nvidia.com/gpumem-percentage``); a pod of whole cards asks for
100 of each. A node registers its cards in HAMi's annotation, each split into ``SPLIT`` vGPUs,
and advertises cards x SPLIT ``nvidia.com/gpu``. The trace names its models (G2, T4, ...) as the
product label GPU Feature Discovery would set.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from connectors.trace.alibaba_csv import TraceNode
from streams.placement.spec import PodSpec

SPLIT = 100
"""vGPUs per card: more than the most pods of the trace's smallest share (1 %) one card holds,
so the count never limits where the cores do."""
CARD_MEMORY_MIB = 16_384
"""The trace gives no card memory; shares ask for a percentage of it, so any figure does."""
IMAGE = "registry.invalid/gpufrag/none:0"
"""No kubelet runs: no image is ever pulled."""


def node_object(node: TraceNode, *, taints: list[dict[str, str]] | None = None) -> dict[str, Any]:
    cards = [
        {
            "id": f"GPU-{node.name}-{i}",
            "index": i,
            "count": SPLIT,
            "devmem": CARD_MEMORY_MIB,
            "devcore": 100,
            "type": f"NVIDIA-{node.gpu_model}",
            "health": True,
        }
        for i in range(node.gpu_count)
    ]
    resources = {
        "cpu": f"{node.cpu_milli}m",
        "memory": f"{node.memory_mib}Mi",
        "pods": "1000",
        "nvidia.com/gpu": str(node.gpu_count * SPLIT),
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": node.name,
            "labels": {
                "kubernetes.io/hostname": node.name,
                "nvidia.com/gpu.product": node.gpu_model or "",
                "nvidia.com/gpu.count": str(node.gpu_count),
            },
            "annotations": {"hami.io/node-nvidia-register": json.dumps(cards)},
        },
        "spec": {"taints": taints or []},
        "status": ready_status(resources),
    }


def ready_status(resources: dict[str, str]) -> dict[str, Any]:
    """A node's status as a kubelet would report it Ready (none runs here)."""
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "capacity": resources,
        "allocatable": resources,
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "KubeletReady",
                "message": "no kubelet: marked Ready by the test",
                "lastHeartbeatTime": now,
                "lastTransitionTime": now,
            }
        ],
    }


def pod_object(pod: PodSpec, *, namespace: str, name: str) -> dict[str, Any]:
    shape = pod.shape
    requests: dict[str, str] = {"cpu": f"{shape.cpu_milli}m", "memory": f"{pod.memory_mib}Mi"}
    limits: dict[str, str] = {}
    if shape.gpu_count > 0 and shape.gpu_milli > 0:
        percent = str(shape.gpu_milli // 10) if shape.is_shared_gpu else "100"
        limits = {
            "nvidia.com/gpu": str(shape.gpu_count),
            "nvidia.com/gpucores": percent,
            "nvidia.com/gpumem-percentage": percent,
        }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"trace-pod": pod.name}},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "main",
                    "image": IMAGE,
                    "resources": {"requests": requests, "limits": limits},
                }
            ],
        },
    }
