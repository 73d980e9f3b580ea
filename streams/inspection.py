"""One snapshot of a cluster analysed at once: the cards per node in their sharing modes, the
FGD fragmentation against the snapshot's own pods, and a verdict for every pending pod.

The same join, capacity index and explanations as the streaming runners use, fed once instead
of event by event, so ``gpufrag inspect`` and a live watch agree on one state.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from models import AnalysisSettings, GpuSample, GpuState, Node, Pod, TaskProfile
from models.analysis import Explanation, NearMiss
from models.cards import SharingMode
from streams.cluster.view import ClusterView
from streams.fragmentation.pending import explain_task
from streams.profiles.join import (
    CardKey,
    GpuTelemetry,
    node_profile,
    task_profile,
    telemetry_of,
)
from streams.profiles.operators import DEFAULT_RULES

__all__ = ["CardView", "Inspection", "NodeView", "PendingView", "inspect_cluster"]


@dataclass(frozen=True, slots=True)
class CardView:
    index: int
    mode: str
    alloc_fraction: float
    memory_used_mib: float | None
    pods: tuple[str, ...]
    pod_memory_mib: dict[str, float]
    instance_memory_used_mib: dict[int, float]
    memory_shared: bool
    detail: str
    """What is allocated and free, in the mode's own units."""
    healthy: bool = True
    fault: str | None = None


@dataclass(frozen=True, slots=True)
class NodeView:
    name: str
    gpu_model: str | None
    cards: tuple[CardView, ...]


@dataclass(frozen=True, slots=True)
class PendingView:
    pod: str
    fits_cluster_total: bool
    fits_some_node: bool
    blocking: dict[str, int]
    """Reason -> how many nodes it rules out."""
    near_misses: tuple[NearMiss, ...]
    scheduler_message: str | None


@dataclass(frozen=True, slots=True)
class Inspection:
    gpus: int
    gpus_allocated: float
    frag_amount_pct: float
    frag_ratio_pct: float
    nodes: tuple[NodeView, ...]
    pending: tuple[PendingView, ...]
    typical_pods: int
    typical_gpu_pods: int
    """Typical pod shapes that ask for a GPU: with none, the measure weighs only CPU pods."""

    def as_json(self) -> dict[str, object]:
        return {
            "gpus": self.gpus,
            "gpus_allocated": round(self.gpus_allocated, 4),
            "frag_amount_pct": round(self.frag_amount_pct, 2),
            "frag_ratio_pct": round(self.frag_ratio_pct, 2),
            "nodes": [
                {
                    "name": n.name,
                    "gpu_model": n.gpu_model,
                    "cards": [
                        {
                            "index": c.index,
                            "mode": c.mode,
                            "alloc_fraction": round(c.alloc_fraction, 4),
                            "memory_used_mib": c.memory_used_mib,
                            "memory_shared": c.memory_shared,
                            "pods": list(c.pods),
                            "pod_memory_mib": c.pod_memory_mib,
                            "instance_memory_used_mib": c.instance_memory_used_mib,
                            "healthy": c.healthy,
                            "fault": c.fault,
                        }
                        for c in n.cards
                    ],
                }
                for n in self.nodes
            ],
            "pending": [
                {
                    "pod": p.pod,
                    "fits_cluster_total": p.fits_cluster_total,
                    "fits_some_node": p.fits_some_node,
                    "blocking": p.blocking,
                    "closest_nodes": [m.node for m in p.near_misses],
                    "scheduler_message": p.scheduler_message,
                }
                for p in self.pending
            ],
        }


def _detail(card: GpuState) -> str:
    if not card.healthy:
        return f"out of service: {card.fault or 'node problem condition'}"
    if card.mode is SharingMode.MIG:
        used = ", ".join(f"{n}x{p}" for p, n in sorted(card.mig_used.items())) or "none"
        free = ", ".join(f"{n}x{p}" for p, n in sorted(card.mig_free.items())) or "none"
        return f"instances used {used}; free {free}"
    if card.mode is SharingMode.TIME_SLICED:
        return f"{card.units - card.free_units} of {card.units} replicas used"
    if card.mode is SharingMode.HAMI:
        mem = "" if card.memory_free_mib is None else f", {card.memory_free_mib} MiB unpromised"
        return f"{card.free_units / 10:.0f} % cores free{mem}"
    return f"{1000 - card.milli_free} of 1000 milli used"


def _telemetry(
    samples: Iterable[GpuSample], uids: dict[str, str], *, at: datetime
) -> dict[str, dict[CardKey, GpuTelemetry]]:
    # one instant: a fault read now stays (no time passes in a snapshot to recover in)
    out: dict[str, dict[CardKey, GpuTelemetry]] = defaultdict(dict)
    for s in samples:
        card = (s.gpu_index, s.mig_instance)
        out[s.node][card] = telemetry_of(s, out[s.node].get(card), uids, at=at, rules=DEFAULT_RULES)
    return out


def inspect_cluster(
    nodes: list[Node],
    pods: Iterable[Pod],
    samples: Iterable[GpuSample],
    *,
    at: datetime,
    settings: AnalysisSettings,
    scheduler_messages: dict[str, str] | None = None,
) -> Inspection:
    """The snapshot analysed. ``pods`` is read once, in order: an iterator that lets each pod
    go once its profile is built keeps 20,000 Pods from outliving their profiles."""
    tasks = {p.key: task_profile(p, None, at=at) for p in pods}
    telemetry = _telemetry(samples, {t.uid: k for k, t in tasks.items() if t.uid}, at=at)
    view = ClusterView(settings=settings, typical=None)
    on_node: dict[str, list[TaskProfile]] = defaultdict(list)
    for t in tasks.values():
        if t.node is not None:
            on_node[t.node].append(t)
    profiles = [
        node_profile(n, on_node.get(n.name, []), telemetry.get(n.name, {}), at=at)
        for n in sorted(nodes, key=lambda n: n.name)
    ]
    for p in profiles:
        view.put_node(p.name, p)
    for key in sorted(tasks):
        view.put_task(key, tasks[key])
    view.rebuild_typical(at)
    messages = scheduler_messages or {}
    pending = []
    # One snapshot, one index: pods of one shape (a job's replicas, a gang) get one answer,
    # worked out once. explain_task reads the index and only these fields of the task; the
    # repr is the key because a request's MIG dict is not hashable (equal reprs: equal
    # requests; unequal ones only cost a second search). 2,000 pending pods of 1,080 shapes,
    # each searched against 2,000 nodes, were half of inspect's time.
    answers: dict[tuple[object, ...], Explanation] = {}
    for key in sorted(view.pending):
        task = view.tasks[key]
        shape = (repr(task.requests), task.gpu_models, task.tolerations)
        out = answers.get(shape)
        if out is None:
            out = answers[shape] = explain_task(view.index, task, near_miss_nodes=3)
        pending.append(
            PendingView(
                pod=key,
                fits_cluster_total=out.fits_cluster_total,
                fits_some_node=out.fits_some_node,
                blocking={r.value: n for r, n in out.blocking},
                near_misses=out.near_misses,
                scheduler_message=messages.get(key),
            )
        )
    ix = view.index
    return Inspection(
        gpus=sum(len(p.gpus) for p in profiles),
        gpus_allocated=sum(p.gpus_allocated for p in profiles),
        frag_amount_pct=ix.frag_amount_pct,
        frag_ratio_pct=ix.frag_ratio_pct,
        nodes=tuple(
            NodeView(
                name=p.name,
                gpu_model=p.gpu_model,
                cards=tuple(
                    CardView(
                        index=g.index,
                        mode=g.mode.value,
                        alloc_fraction=g.alloc_fraction,
                        memory_used_mib=g.memory_used_mib,
                        pods=g.pods,
                        pod_memory_mib=dict(g.pod_memory_mib),
                        instance_memory_used_mib=dict(g.instance_memory_used_mib),
                        memory_shared=g.memory_shared,
                        detail=_detail(g),
                        healthy=g.healthy,
                        fault=g.fault,
                    )
                    for g in p.gpus
                ),
            )
            for p in profiles
        ),
        pending=tuple(pending),
        typical_pods=len(view.typical),
        typical_gpu_pods=sum(1 for tp in view.typical.pods if tp.shape.gpu_count > 0),
    )
