"""The profile join operator: plain state, event time only, outputs listed explicitly.

It keeps the latest node objects, a task profile per pod, and the latest GPU telemetry per card,
and re-derives a node's profile from those whenever any of them changes. The derivation is a
pure function (``node_profile``), so a profile after any event sequence equals the profile
computed from scratch from the final objects.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime

from models import (
    Envelope,
    GpuSample,
    GpuSampleEvent,
    GpuState,
    Node,
    NodeEvent,
    NodeProfile,
    Pod,
    PodEvent,
    PodPhase,
    SchedulingEvent,
    TaskProfile,
)
from streams.profiles.gpus import free_per_gpu

# XIDs after which a card should not take new work (NVIDIA's XID catalogue): double-bit ECC,
# row-remap failure, NVLink error, fallen off the bus, uncontained ECC.
UNHEALTHY_XIDS = frozenset({48, 64, 74, 79, 95})
TERMINAL_PHASES = frozenset({PodPhase.SUCCEEDED, PodPhase.FAILED})


@dataclass(frozen=True, slots=True)
class NodeProfileUpdate:
    name: str
    profile: NodeProfile | None  # None: the node is gone
    at: datetime


@dataclass(frozen=True, slots=True)
class TaskProfileUpdate:
    key: str
    profile: TaskProfile | None  # None: the pod is gone
    at: datetime


ProfileUpdate = NodeProfileUpdate | TaskProfileUpdate


@dataclass(frozen=True, slots=True)
class GpuTelemetry:
    memory_total_mib: float | None
    memory_used_mib: float | None
    last_xid: int | None


def holds_resources(task: TaskProfile) -> bool:
    """Bound and not finished: what the scheduler counts against a node."""
    return task.node is not None and task.phase not in TERMINAL_PHASES


def node_profile(
    node: Node,
    tasks: list[TaskProfile],
    telemetry: dict[int, GpuTelemetry],
    *,
    at: datetime,
) -> NodeProfile:
    """A node's profile from its object, the tasks bound to it and its cards' telemetry."""
    held = sorted((t for t in tasks if holds_resources(t)), key=lambda t: t.key)
    free, _ = free_per_gpu(node.gpu_count, ((t.key, t.requests, t.gpu_indices) for t in held))
    gpus = []
    for i, milli in enumerate(free):
        tel = telemetry.get(i)
        xid = tel.last_xid if tel else None
        gpus.append(
            GpuState(
                index=i,
                milli_free=milli,
                memory_total_mib=tel.memory_total_mib if tel else None,
                memory_used_mib=tel.memory_used_mib if tel else None,
                healthy=xid not in UNHEALTHY_XIDS,
                last_xid=xid,
            )
        )
    return NodeProfile(
        name=node.name,
        gpu_model=node.gpu_model,
        gpus=tuple(gpus),
        cpu_milli_allocatable=node.cpu_milli,
        cpu_milli_requested=sum(t.requests.cpu_milli for t in held),
        memory_mib_allocatable=node.memory_mib,
        memory_mib_requested=sum(t.requests.memory_mib for t in held),
        labels=node.labels,
        taints=node.taints,
        pool=node.pool,
        unschedulable=node.unschedulable,
        pods=tuple(t.key for t in held),
        updated_at=at,
    )


def task_profile(pod: Pod, previous: TaskProfile | None, *, at: datetime) -> TaskProfile:
    """Fold a pod's latest state into its history: first bind time, finish time, OOM count."""
    bound_at = previous.bound_at if previous else None
    if pod.node is not None and bound_at is None:
        bound_at = at
    finished_at = previous.finished_at if previous else None
    if pod.phase in TERMINAL_PHASES and finished_at is None:
        finished_at = at
    return TaskProfile(
        key=pod.key,
        uid=pod.uid,
        requests=pod.requests,
        gpu_models=pod.gpu_models,
        priority=pod.priority,
        queue=pod.queue,
        tenant=pod.tenant,
        workload_kind=pod.workload_kind,
        preemptible=pod.preemptible,
        phase=pod.phase,
        node=pod.node,
        gpu_indices=pod.gpu_indices,
        gang=pod.gang,
        tolerations=pod.tolerations,
        created_at=pod.created_at,
        bound_at=bound_at,
        finished_at=finished_at,
        gpu_memory_peak_mib=previous.gpu_memory_peak_mib if previous else None,
        oom_count=previous.oom_count if previous else 0,
    )


class ProfileJoin:
    """Joins the event streams into node and task profiles (``apply``/``advance``/``snapshot``)."""

    def __init__(self) -> None:
        self.nodes: dict[str, Node] = {}
        self.tasks: dict[str, TaskProfile] = {}
        self.node_profiles: dict[str, NodeProfile] = {}
        self.bound_on: defaultdict[str, set[str]] = defaultdict(set)
        self.telemetry: defaultdict[str, dict[int, GpuTelemetry]] = defaultdict(dict)
        self.watermark: datetime | None = None

    def apply(self, env: Envelope) -> list[ProfileUpdate]:
        at = env.event_time
        if self.watermark is None or at > self.watermark:
            self.watermark = at
        payload = env.payload
        if isinstance(payload, NodeEvent):
            return self._on_node(payload, at)
        if isinstance(payload, PodEvent):
            return self._on_pod(payload, at)
        if isinstance(payload, GpuSampleEvent):
            return self._on_sample(payload.sample, at)
        if isinstance(payload, SchedulingEvent):
            return self._on_scheduling(payload, at)
        raise TypeError(f"unhandled payload {type(payload).__name__}")

    def advance(self, event_time: datetime) -> list[ProfileUpdate]:
        """Profiles change only with events; time alone emits nothing."""
        if self.watermark is None or event_time > self.watermark:
            self.watermark = event_time
        return []

    def _refresh_node(self, name: str, at: datetime) -> list[ProfileUpdate]:
        node = self.nodes.get(name)
        if node is None:
            if self.node_profiles.pop(name, None) is None:
                return []
            return [NodeProfileUpdate(name, None, at)]
        tasks = [self.tasks[k] for k in self.bound_on.get(name, ())]
        profile = node_profile(node, tasks, self.telemetry.get(name, {}), at=at)
        old = self.node_profiles.get(name)
        if old is not None and old.model_copy(update={"updated_at": at}) == profile:
            return []
        self.node_profiles[name] = profile
        return [NodeProfileUpdate(name, profile, at)]

    def _on_node(self, ev: NodeEvent, at: datetime) -> list[ProfileUpdate]:
        name = ev.node.name
        if ev.change == "delete":
            self.nodes.pop(name, None)
            self.telemetry.pop(name, None)
        else:
            self.nodes[name] = ev.node
        return self._refresh_node(name, at)

    def _on_pod(self, ev: PodEvent, at: datetime) -> list[ProfileUpdate]:
        key = ev.pod.key
        old = self.tasks.get(key)
        out: list[ProfileUpdate] = []
        if ev.change == "delete":
            if old is None:
                return []
            del self.tasks[key]
            out.append(TaskProfileUpdate(key, None, at))
        else:
            new = task_profile(ev.pod, old, at=at)
            if new == old:
                return []
            self.tasks[key] = new
            out.append(TaskProfileUpdate(key, new, at))
        touched = set()
        if old is not None and old.node is not None:
            self.bound_on[old.node].discard(key)
            touched.add(old.node)
        current = self.tasks.get(key)
        if current is not None and current.node is not None:
            self.bound_on[current.node].add(key)
            touched.add(current.node)
        for node in sorted(touched):
            if not self.bound_on.get(node):
                self.bound_on.pop(node, None)
            out.extend(self._refresh_node(node, at))
        return out

    def _on_sample(self, s: GpuSample, at: datetime) -> list[ProfileUpdate]:
        cards = self.telemetry[s.node]
        prev = cards.get(s.gpu_index)
        cards[s.gpu_index] = GpuTelemetry(
            memory_total_mib=s.memory_total_mib,
            memory_used_mib=s.memory_used_mib,
            last_xid=s.xid if s.xid else (prev.last_xid if prev else None),
        )
        out: list[ProfileUpdate] = []
        if s.pod and s.memory_used_mib is not None:
            key = f"{s.namespace or 'default'}/{s.pod}"
            task = self.tasks.get(key)
            if task is not None and (
                task.gpu_memory_peak_mib is None or s.memory_used_mib > task.gpu_memory_peak_mib
            ):
                task = task.model_copy(update={"gpu_memory_peak_mib": s.memory_used_mib})
                self.tasks[key] = task
                out.append(TaskProfileUpdate(key, task, at))
        if s.node in self.nodes:
            out.extend(self._refresh_node(s.node, at))
        return out

    def _on_scheduling(self, ev: SchedulingEvent, at: datetime) -> list[ProfileUpdate]:
        e = ev.event
        if e.reason != "OOMKilled" or not e.pod_name:
            return []
        key = f"{e.pod_namespace or 'default'}/{e.pod_name}"
        task = self.tasks.get(key)
        if task is None:
            return []
        task = task.model_copy(update={"oom_count": task.oom_count + e.count})
        self.tasks[key] = task
        return [TaskProfileUpdate(key, task, at)]
