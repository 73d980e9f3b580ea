"""The profile join as operators: the pod-keyed half, the node-keyed half, and both in one.

The Faust runner hosts the halves on pod- and node-keyed agents, with bindings and memory peaks
travelling between them over Kafka; the embedded runner hosts ``ProfileJoin``, which routes them
in process. Both fold the same steps (``task_step``, ``node_step``), so a profile does not depend
on which runner made it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

import orjson

from models import (
    Envelope,
    GpuSample,
    GpuSampleEvent,
    NodeEvent,
    NodeProfile,
    PodEvent,
    QueueEvent,
    SchedulingEvent,
    TaskProfile,
    key_of,
)
from models.settings import DetectorSettings
from streams.instants import OrderKey
from streams.operator import StateChanges
from streams.profiles.join import (
    Binding,
    CardRules,
    NodeProfileUpdate,
    NodeState,
    PeakReport,
    ProfileUpdate,
    QueueUpdate,
    QuotaRefused,
    TaskProfileUpdate,
    node_step,
    task_step,
)
from streams.profiles.node_state import decode_node_state, encode_node_state
from streams.profiles.quiet import QuietRules
from streams.profiles.system_oom import SYSTEM_OOM

__all__ = [
    "NodeInput",
    "NodeJoin",
    "ProfileJoin",
    "TaskInput",
    "TaskJoin",
    "is_system_oom",
    "node_input",
    "ordered_deltas",
    "queue_update",
    "quota_refused",
    "task_input",
]


def card_rules(detectors: DetectorSettings) -> CardRules:
    idle = detectors.idle_gpu
    return CardRules(
        recover_after_s=detectors.gpu_health.recover_after_s,
        quiet=QuietRules(
            window_s=idle.window_s, activity_pct=idle.activity_pct, gap_s=idle.sample_gap_s
        ),
    )


DEFAULT_RULES = card_rules(DetectorSettings())


@dataclass(frozen=True, slots=True)
class TaskInput:
    """One input of a pod: its object or a scheduler event about it."""

    key: str
    item: PodEvent | SchedulingEvent
    at: datetime
    event_id: str | None = None
    """The event's id; an OOM kill is counted once per id (redelivery, a watcher's re-list)."""


@dataclass(frozen=True, slots=True)
class NodeInput:
    """One input of a node: its object, a GPU sample, or a pod binding to it."""

    node: str
    item: NodeEvent | GpuSample | Binding | SchedulingEvent
    at: datetime
    event_id: str | None = None
    """A SystemOOM event's id: each kill is counted once."""


class _Clock:
    def __init__(self) -> None:
        self._now: datetime | None = None
        self._tracking = False
        """Record changed keys for ``snapshot`` only once a host has restored the operator (it
        persists state); an in-process run would keep every key it ever saw."""

    @property
    def now(self) -> datetime | None:
        return self._now

    def _see(self, at: datetime) -> None:
        if self._now is None or at > self._now:
            self._now = at

    def advance(self, event_time: datetime) -> list[object]:
        """Profiles change only with input; time alone emits nothing."""
        self._see(event_time)
        return []

    def next_due(self) -> datetime | None:
        return None

    def flush(self) -> list[object]:
        return []


class TaskJoin(_Clock):
    """The pod-keyed half: a task profile per pod. Snapshot entries: pod key -> its profile."""

    def __init__(self) -> None:
        super().__init__()
        self.tasks: dict[str, TaskProfile] = {}
        self._dirty: set[str] = set()

    def apply(self, item: TaskInput) -> list[TaskProfileUpdate | Binding]:
        self._see(item.at)
        key = item.key
        prev = self.tasks.get(key)
        new, updates, binds = task_step(key, prev, item.item, item.at, event_id=item.event_id)
        if new is not prev:
            if new is None:
                self.tasks.pop(key, None)
            else:
                self.tasks[key] = new
            if self._tracking:
                self._dirty.add(key)
        return [*updates, *binds]

    def snapshot(self) -> StateChanges:
        out: StateChanges = {}
        for key in sorted(self._dirty):
            task = self.tasks.get(key)
            out[key] = None if task is None else orjson.dumps(task.model_dump(mode="json"))
        self._dirty.clear()
        return out

    def restore(self, entries: Mapping[str, bytes]) -> None:
        self._tracking = True
        for key, raw in entries.items():
            body = orjson.loads(raw)
            if isinstance(body, dict) and set(body) == {"profile", "seen_at"}:
                # saved while peaks came back to this stage, dated by the pod's latest input
                body = body["profile"]
            self.tasks[key] = TaskProfile.model_validate(body)


class NodeJoin(_Clock):
    """The node-keyed half: a node's object, bound tasks and card telemetry. Snapshot entries:
    node name -> its state."""

    def __init__(self, *, rules: CardRules = DEFAULT_RULES) -> None:
        super().__init__()
        self.rules = rules
        self.node_states: dict[str, NodeState] = {}
        self._dirty: set[str] = set()

    def apply(self, item: NodeInput) -> list[NodeProfileUpdate | PeakReport]:
        self._see(item.at)
        name = item.node
        st = self.node_states.setdefault(name, NodeState())
        updates, peaks = node_step(
            name, st, item.item, item.at, rules=self.rules, event_id=item.event_id
        )
        if st.empty and st.profile is None:
            del self.node_states[name]
        if self._tracking:
            self._dirty.add(name)
        return [*updates, *peaks]

    def snapshot(self) -> StateChanges:
        out: StateChanges = {}
        for name in sorted(self._dirty):
            st = self.node_states.get(name)
            out[name] = None if st is None else encode_node_state(st)
        self._dirty.clear()
        return out

    def restore(self, entries: Mapping[str, bytes]) -> None:
        self._tracking = True
        for name, raw in entries.items():
            self.node_states[name] = decode_node_state(raw)


def task_input(env: Envelope) -> TaskInput | None:
    """The pod-keyed half's input in an event, if it has one."""
    p = env.payload
    if isinstance(p, PodEvent):
        return TaskInput(p.pod.key, p, env.event_time, env.id)
    if isinstance(p, SchedulingEvent) and p.event.pod_name:
        return TaskInput(key_of(p), p, env.event_time, env.id)
    return None  # node- or cluster-scoped scheduler events say nothing about a task


def node_input(env: Envelope) -> NodeInput | None:
    """The node-keyed half's input in an event, if it has one."""
    p = env.payload
    if isinstance(p, NodeEvent):
        return NodeInput(p.node.name, p, env.event_time)
    if isinstance(p, GpuSampleEvent):
        return NodeInput(p.sample.node, p.sample, env.event_time)
    if is_system_oom(p):
        assert isinstance(p, SchedulingEvent) and p.event.node is not None
        return NodeInput(p.event.node, p, env.event_time, env.id)
    return None


def queue_update(env: Envelope) -> QueueUpdate:
    """A quota or queue event as the cluster view takes it (both runners pass it through)."""
    p = env.payload
    assert isinstance(p, QueueEvent)
    return QueueUpdate(p.queue.key, None if p.change == "delete" else p.queue, env.event_time)


def quota_refused(env: Envelope) -> QuotaRefused | None:
    """A ResourceQuota's refusal of an owner's pod, as the cluster view takes it (both runners
    pass it through); None for every other event."""
    p = env.payload
    if isinstance(p, SchedulingEvent) and p.event.quota is not None and not p.event.pod_name:
        return QuotaRefused(p.event, env.event_time)
    return None


def is_system_oom(p: object) -> bool:
    """The kubelet's report of the node's kernel OOM killer: about a node, not a pod."""
    return (
        isinstance(p, SchedulingEvent)
        and p.event.reason == SYSTEM_OOM
        and not p.event.pod_name
        and bool(p.event.node)
    )


class ProfileJoin(_Clock):
    """Both halves in one process (the embedded runner): bindings go straight to the node half.
    Snapshot entries: ``t/<pod>`` and ``n/<node>``."""

    def __init__(self, *, rules: CardRules = DEFAULT_RULES) -> None:
        super().__init__()
        self.task_half = TaskJoin()
        self.node_half = NodeJoin(rules=rules)

    @property
    def tasks(self) -> dict[str, TaskProfile]:
        return self.task_half.tasks

    @property
    def node_states(self) -> dict[str, NodeState]:
        return self.node_half.node_states

    @property
    def node_profiles(self) -> dict[str, NodeProfile]:
        return {n: st.profile for n, st in self.node_states.items() if st.profile is not None}

    def apply(self, item: Envelope) -> list[ProfileUpdate]:
        self._see(item.event_time)
        if (t := task_input(item)) is not None:
            return self._task(t)
        if (n := node_input(item)) is not None:
            return list(self.node_half.apply(n))
        if isinstance(item.payload, QueueEvent):
            return [queue_update(item)]
        if (refused := quota_refused(item)) is not None:
            return [refused]
        if isinstance(item.payload, SchedulingEvent):
            return []  # other node- or cluster-scoped scheduler events: in the history only
        raise TypeError(f"unhandled payload {type(item.payload).__name__}")

    def _task(self, item: TaskInput) -> list[ProfileUpdate]:
        out: list[ProfileUpdate] = []
        for o in self.task_half.apply(item):
            if isinstance(o, Binding):
                out += [
                    u
                    for u in self.node_half.apply(NodeInput(o.node, o, item.at))
                    if isinstance(u, NodeProfileUpdate)
                ]
            else:
                out.append(o)
        return out

    def snapshot(self) -> StateChanges:
        out = {f"t/{k}": v for k, v in self.task_half.snapshot().items()}
        out.update({f"n/{k}": v for k, v in self.node_half.snapshot().items()})
        return out

    def restore(self, entries: Mapping[str, bytes]) -> None:
        self.task_half.restore({k[2:]: v for k, v in entries.items() if k.startswith("t/")})
        self.node_half.restore({k[2:]: v for k, v in entries.items() if k.startswith("n/")})


TASK_RANK, NODE_RANK = 0, 1
"""Within one event, the pod stage's deltas come before the node stage's (``OrderKey.rank``)."""


def ordered_deltas(
    env: Envelope, updates: Sequence[ProfileUpdate]
) -> list[tuple[OrderKey, ProfileUpdate]]:
    """The order keys the distributed runner gives the same deltas (see ``OrderKey``)."""
    subs = [0, 0]
    out = []
    for u in updates:
        rank = NODE_RANK if isinstance(u, NodeProfileUpdate | PeakReport) else TASK_RANK
        out.append((OrderKey(u.at, env.seq or 0, env.source, env.id, rank, subs[rank]), u))
        subs[rank] += 1
    return out
