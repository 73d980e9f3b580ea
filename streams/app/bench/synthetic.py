"""A synthetic cluster and its live load, drawn from one seed, for `gpufrag bench`.

The benchmark must not depend on a trace someone has to download, and two runs with one seed
must measure the same input, so every node, pod, sample and event here is a pure function of
the seed and the sizes. Events are built as the plain dicts the bus carries (the wire form of
``models.Envelope``), so a case can time decoding and validation separately from building.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

START = datetime(2025, 1, 6, tzinfo=UTC)
NODE_TYPES: tuple[tuple[str, int, int, int, int], ...] = (
    # (GPU model, cards, CPU milli, memory MiB, GPU memory MiB): 8-card servers of four kinds,
    # the 10,000-node cluster with its 80,000 GPUs
    ("H100", 8, 192_000, 2_000_000, 81_559),
    ("A100", 8, 128_000, 1_000_000, 81_920),
    ("L40S", 8, 128_000, 1_000_000, 46_068),
    ("A10", 8, 96_000, 512_000, 23_028),
)
NODE_WEIGHTS = (0.4, 0.4, 0.1, 0.1)
POD_GPUS = (1, 1, 1, 2, 4, 8)
"""Cards per GPU pod: mostly single-card work, some multi-card jobs (the FGD mix)."""
FAILED_SCHEDULING = "0/{n} nodes are available: {n} Insufficient nvidia.com/gpu."


@dataclass(frozen=True, slots=True)
class SynthNode:
    name: str
    gpu_model: str
    gpu_count: int
    cpu_milli: int
    memory_mib: int
    gpu_memory_mib: int


@dataclass(frozen=True, slots=True)
class SynthPod:
    namespace: str
    name: str
    gpus: int
    gpu_milli: int
    cpu_milli: int
    memory_mib: int
    node: str | None
    """The node it runs on; None: pending."""
    gpu_indices: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class SynthCluster:
    nodes: list[SynthNode]
    pods: list[SynthPod]
    """Running pods first, then the pending ones."""

    @property
    def gpus(self) -> int:
        return sum(n.gpu_count for n in self.nodes)

    @property
    def pending(self) -> list[SynthPod]:
        return [p for p in self.pods if p.node is None]


def cluster(
    *, seed: int, nodes: int, running: int, pending: int, cpu_only: int = 0
) -> SynthCluster:
    """``nodes`` nodes with ``running`` GPU pods placed on free cards (first fit over the nodes
    in a random order, so the cluster is partly used and fragmented), ``cpu_only`` pods without
    GPUs spread over the nodes, and ``pending`` GPU pods bound nowhere."""
    rng = np.random.default_rng(seed)
    kinds = rng.choice(len(NODE_TYPES), size=nodes, p=NODE_WEIGHTS)
    made = [SynthNode(f"node-{i:05d}", *NODE_TYPES[k]) for i, k in enumerate(kinds.tolist())]
    free = [list(range(n.gpu_count)) for n in made]
    order = rng.permutation(nodes).tolist()
    pods: list[SynthPod] = []
    at = 0
    for i in range(running):
        gpus = int(rng.choice(POD_GPUS))
        # the first node in the shuffled order with room, among the next 64: a pod that finds
        # none is left out, so a nearly full cluster holds fewer running pods than asked
        for step in range(min(nodes, 64)):
            n = order[(at + step) % nodes]
            if len(free[n]) >= gpus:
                at = (at + step + 1) % nodes
                cards = tuple(free[n][:gpus])
                del free[n][:gpus]
                pods.append(_pod(rng, f"run-{i:06d}", gpus, made[n].name, cards))
                break
    pods += [_pod(rng, f"cpu-{i:06d}", 0, made[order[i % nodes]].name, ()) for i in range(cpu_only)]
    pods += [
        _pod(rng, f"pend-{i:05d}", int(rng.choice(POD_GPUS)), None, ()) for i in range(pending)
    ]
    return SynthCluster(made, pods)


def _pod(
    rng: np.random.Generator, name: str, gpus: int, node: str | None, cards: tuple[int, ...]
) -> SynthPod:
    return SynthPod(
        namespace=f"team-{int(rng.integers(0, 20)):02d}",
        name=name,
        gpus=gpus,
        gpu_milli=1000 if gpus else 0,
        cpu_milli=int(rng.integers(1, 9)) * 1000 * max(gpus, 1),
        memory_mib=int(rng.integers(8, 65)) * 1024 * max(gpus, 1),
        node=node,
        gpu_indices=cards,
    )


# --- the wire form of events -----------------------------------------------------------------


def _stamp(seconds: float) -> str:
    return (START + timedelta(seconds=seconds)).isoformat()


def node_payload(node: SynthNode) -> dict[str, Any]:
    return {
        "kind": "node",
        "change": "upsert",
        "node": {
            "name": node.name,
            "cpu_milli": node.cpu_milli,
            "memory_mib": node.memory_mib,
            "gpu_model": node.gpu_model,
            "gpu_count": node.gpu_count,
            "gpu_memory_mib": node.gpu_memory_mib,
        },
    }


def pod_payload(pod: SynthPod, *, created_s: float) -> dict[str, Any]:
    body: dict[str, Any] = {
        "namespace": pod.namespace,
        "name": pod.name,
        "uid": f"uid-{pod.namespace}-{pod.name}",
        "phase": "Pending" if pod.node is None else "Running",
        "node": pod.node,
        "requests": {
            "cpu_milli": pod.cpu_milli,
            "memory_mib": pod.memory_mib,
            "gpu_count": pod.gpus,
            "gpu_milli": pod.gpu_milli,
        },
        "gpu_indices": list(pod.gpu_indices),
        "created_at": _stamp(created_s),
    }
    return {"kind": "pod", "change": "upsert", "pod": body}


def sample_payload(node: SynthNode, index: int, used_mib: float, util: float) -> dict[str, Any]:
    return {
        "kind": "gpu_sample",
        "sample": {
            "node": node.name,
            "gpu_index": index,
            "model": f"NVIDIA {node.gpu_model}",
            "memory_total_mib": float(node.gpu_memory_mib),
            "memory_used_mib": used_mib,
            "utilization_pct": util,
        },
    }


def faulted_sample_payload(node: SynthNode, index: int) -> dict[str, Any]:
    """A sample reporting Xid 79 (the card fell off the bus): the gpu_health detector opens a
    gpu_unhealthy signal for the card at once, so its signal times the path end to end."""
    payload = sample_payload(node, index, 0.0, 0.0)
    payload["sample"]["xid"] = 79
    return payload


def failed_scheduling_payload(pod: SynthPod, nodes: int, count: int) -> dict[str, Any]:
    return {
        "kind": "scheduler",
        "event": {
            "reason": "FailedScheduling",
            "message": FAILED_SCHEDULING.format(n=nodes),
            "pod_namespace": pod.namespace,
            "pod_name": pod.name,
            "pod_uid": f"uid-{pod.namespace}-{pod.name}",
            "count": count,
        },
    }


def _key(payload: dict[str, Any]) -> str:
    """``models.events.key_of`` on the wire form."""
    kind = payload["kind"]
    if kind == "pod":
        return f"{payload['pod']['namespace']}/{payload['pod']['name']}"
    if kind == "node":
        return str(payload["node"]["name"])
    if kind == "gpu_sample":
        return str(payload["sample"]["node"])
    ev = payload["event"]
    return f"{ev['pod_namespace']}/{ev['pod_name']}"


def envelope(payload: dict[str, Any], *, seq: int, at_s: float) -> dict[str, Any]:
    return {
        "id": f"bench-{seq}",
        "key": _key(payload),
        "event_time": _stamp(at_s),
        "source": "bench",
        "seq": seq,
        "payload": payload,
    }


def state_events(c: SynthCluster) -> Iterator[dict[str, Any]]:
    """The cluster as a watcher's first list gives it: every node, then every pod, at t=0
    (made one at a time: 200,000 pods as dicts would be most of the memory case's peak)."""
    for i, n in enumerate(c.nodes):
        yield envelope(node_payload(n), seq=i, at_s=0.0)
    for i, p in enumerate(c.pods, start=len(c.nodes)):
        yield envelope(pod_payload(p, created_s=0), seq=i, at_s=0.0)


def live_events(
    c: SynthCluster, *, seed: int, count: int, first_seq: int, start_s: float = 1.0
) -> Iterator[dict[str, Any]]:
    """The live traffic after the first list, in event-time order: DCGM samples of every card
    every 10 s (the exporter's default interval), and per second one FailedScheduling repeat
    for a pending pod in twenty (a backed-up queue), ``count`` events in all, from ``start_s``
    seconds of event time."""
    rng = np.random.default_rng(seed + 1)
    pending = c.pending
    cards = [(n, i) for n in c.nodes for i in range(n.gpu_count)]
    # 10 s of samples spread evenly: one card's sample every 10 / len(cards) s
    step_s = 10.0 / max(len(cards), 1)
    every = 20
    for k in range(count):
        seq = first_seq + k
        at_s = start_s + k * step_s
        if pending and k % every == every - 1:
            pod = pending[(k // every) % len(pending)]
            payload = failed_scheduling_payload(pod, len(c.nodes), 1 + k // every)
        else:
            node, index = cards[k % len(cards)]
            used = float(rng.integers(0, node.gpu_memory_mib))
            payload = sample_payload(node, index, used, float(rng.integers(0, 101)))
        yield envelope(payload, seq=seq, at_s=at_s)


def kubectl_snapshot(c: SynthCluster) -> dict[str, Any]:
    """``kubectl get nodes,pods -A -o json`` of the cluster, with the fields `inspect` reads."""
    items: list[dict[str, Any]] = [_kube_node(n) for n in c.nodes]
    items += [kube_pod(p) for p in c.pods]
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": items}


def _kube_node(n: SynthNode) -> dict[str, Any]:
    resources = {
        "cpu": f"{n.cpu_milli}m",
        "memory": f"{n.memory_mib}Mi",
        "nvidia.com/gpu": str(n.gpu_count),
        "pods": "110",
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": n.name,
            "uid": f"uid-{n.name}",
            "creationTimestamp": "2025-01-01T00:00:00Z",
            "labels": {
                "kubernetes.io/hostname": n.name,
                "nvidia.com/gpu.product": f"NVIDIA-{n.gpu_model}",
                "nvidia.com/gpu.count": str(n.gpu_count),
                "nvidia.com/gpu.memory": str(n.gpu_memory_mib),
            },
        },
        "spec": {},
        "status": {
            "allocatable": resources,
            "capacity": resources,
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def kube_pod(p: SynthPod) -> dict[str, Any]:
    requests = {
        "cpu": f"{p.cpu_milli}m",
        "memory": f"{p.memory_mib}Mi",
    }
    if p.gpus:
        requests["nvidia.com/gpu"] = str(p.gpus)
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "main",
                "image": "nvcr.io/nvidia/pytorch:25.09-py3",
                "resources": {"requests": requests},
            }
        ],
        "schedulerName": "default-scheduler",
        "priority": 0,
    }
    status: dict[str, Any] = {"phase": "Pending"}
    if p.node is not None:
        spec["nodeName"] = p.node
        status = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": p.name,
            "namespace": p.namespace,
            "uid": f"uid-{p.namespace}-{p.name}",
            "creationTimestamp": "2025-01-01T00:00:00Z",
        },
        "spec": spec,
        "status": status,
    }
