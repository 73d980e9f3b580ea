"""The profile join's steps: one pod's or one node's input folded into its state.

The join keeps the latest node objects, a task profile per pod, and the latest GPU telemetry
per card, and re-derives a node's profile from those whenever any of them changes. The
derivation is a pure function (``node_profile``), so a profile after any event sequence equals
the profile computed from scratch from the final objects.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime

from models import (
    GpuSample,
    Node,
    NodeEvent,
    NodeProfile,
    Pod,
    PodEvent,
    QueueObject,
    SchedulerEvent,
    SchedulingEvent,
    TaskProfile,
)
from streams.profiles.health import health_step
from streams.profiles.heard import heard, waits
from streams.profiles.node_profile import (
    TERMINAL_PHASES,
    CardKey,
    CardRules,
    GpuTelemetry,
    NodeDerived,
    card_telemetry,
    derive,
    holds_resources,
    node_profile,
    profile_of,
)
from streams.profiles.quiet import quiet_step
from streams.profiles.system_oom import SystemOoms, system_oom_step

__all__ = [
    "TERMINAL_PHASES",
    "Binding",
    "CardKey",
    "CardRules",
    "GpuTelemetry",
    "NodeProfileUpdate",
    "NodeState",
    "PeakReport",
    "ProfileUpdate",
    "QueueUpdate",
    "QuotaRefused",
    "TaskProfileUpdate",
    "card_telemetry",
    "holds_resources",
    "node_profile",
    "node_step",
    "task_profile",
    "task_step",
    "telemetry_of",
]


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


@dataclass(frozen=True, slots=True)
class QueueUpdate:
    """A quota or queue object passed through to the cluster view: low-rate and
    cluster-wide, so it needs no join."""

    key: str
    queue: QueueObject | None  # None: the object is gone
    at: datetime


@dataclass(frozen=True, slots=True)
class QuotaRefused:
    """A controller's pod that a ResourceQuota refused (a FailedCreate Event with its refusal
    read), passed through to the cluster view like a quota object: there is no pod to join."""

    event: SchedulerEvent
    at: datetime


def telemetry_of(
    sample: GpuSample,
    prev: GpuTelemetry | None,
    uids: dict[str, str],
    *,
    at: datetime,
    rules: CardRules,
) -> GpuTelemetry:
    """A card's (or MIG instance's) reading as the join keeps it; a pod the sampler could
    name only by its cgroup's uid is named by the bound pod with that uid (``uids``)."""
    named: dict[str, float] = {}
    if sample.pod_memory_mib is not None:
        named = dict(sample.pod_memory_mib)
    elif sample.pod and sample.memory_used_mib is not None:
        named = {_pod_key(sample.namespace, sample.pod): sample.memory_used_mib}
    pods: dict[str, float] = {}
    for key, mib in named.items():
        if key.startswith("uid:"):
            if key[4:] not in uids:
                continue  # not bound here (yet): no pod to give the figure to
            key = uids[key[4:]]
        pods[key] = pods.get(key, 0.0) + mib
    return GpuTelemetry(
        memory_total_mib=sample.memory_total_mib,
        memory_used_mib=sample.memory_used_mib,
        last_xid=sample.xid if sample.xid else (prev.last_xid if prev else None),
        pods=tuple(sorted(pods.items())),
        health=health_step(
            prev.health if prev else None, sample, at, recover_after_s=rules.recover_after_s
        ),
        quiet=quiet_step(prev.quiet if prev else None, sample, at, rules=rules.quiet),
    )


def _pod_key(namespace: str | None, pod: str) -> str:
    return pod if pod.startswith("uid:") else f"{namespace or 'default'}/{pod}"


def task_profile(pod: Pod, previous: TaskProfile | None, *, at: datetime) -> TaskProfile:
    """Fold a pod's latest state into its history: first bind time, finish time, OOM count."""
    bound_at = previous.bound_at if previous else None
    if pod.node is not None and bound_at is None:
        bound_at = at
    finished_at = previous.finished_at if previous else None
    if pod.phase in TERMINAL_PHASES and finished_at is None:
        finished_at = at
    return TaskProfile.of_pod(
        pod,
        bound_at=bound_at,
        finished_at=finished_at,
        oom_count=previous.oom_count if previous else 0,
        counted_ooms=previous.counted_ooms if previous else (),
        scheduler=previous.scheduler if previous and waits(pod.node, pod.phase) else None,
        preemptions=previous.preemptions if previous else 0,
        preempted=previous.preempted if previous else None,
    )


@dataclass(frozen=True, slots=True)
class Binding:
    """A task as its node sees it: sent to the node's stage whenever the pod appears on, changes
    on, or leaves that node (``task`` None: no longer there). Keyed by node."""

    node: str
    key: str
    task: TaskProfile | None
    at: datetime


@dataclass(frozen=True, slots=True)
class PeakReport:
    """A new GPU memory peak of a pod bound to ``node``: made by the node's stage, which reads
    the samples and the bindings in event-time order, and stored as history (never fed back to
    the pod's stage: that loop had no order, and a short-lived pod's peak came after it was
    gone). Keyed by pod."""

    key: str
    node: str
    used_mib: float
    at: datetime


ProfileUpdate = NodeProfileUpdate | TaskProfileUpdate | PeakReport | QueueUpdate | QuotaRefused


@dataclass(slots=True)
class NodeState:
    """Everything the node-keyed stage keeps for one node."""

    node: Node | None = None
    bound: dict[str, TaskProfile] = field(default_factory=dict)
    telemetry: dict[CardKey, GpuTelemetry] = field(default_factory=dict)
    profile: NodeProfile | None = None
    system_ooms: SystemOoms = field(default_factory=SystemOoms)
    peaks: dict[str, float] = field(default_factory=dict)
    """Each bound pod's largest GPU memory reading so far (MiB): a peak is reported when it
    rises, and forgotten when the pod leaves the node."""
    derived: NodeDerived | None = field(default=None, compare=False, repr=False)
    """What the profile takes from the node and its bindings, and each card's state: dropped
    when they change (``node_step``), never saved (rebuilt from the rest on first use)."""

    @property
    def empty(self) -> bool:
        return self.node is None and not self.bound and not self.telemetry and not self.peaks


def _refresh(
    name: str, st: NodeState, at: datetime, rules: CardRules | None = None
) -> list[NodeProfileUpdate]:
    if st.node is None:
        if st.profile is None:
            return []
        st.profile = None
        return [NodeProfileUpdate(name, None, at)]
    derived = st.derived
    fresh = derived is None
    if derived is None:
        derived = derive(st.node, st.bound.values(), st.telemetry)
    profile = profile_of(
        st.node,
        derived,
        st.telemetry,
        at=at,
        system_ooms=st.system_ooms,
        rules=rules,
        validate=fresh,
    )
    st.derived = derived  # kept once its profile validated: a refused one is derived again
    old = st.profile
    if old is not None and old.model_copy(update={"updated_at": at}) == profile:
        return []
    st.profile = profile
    return [NodeProfileUpdate(name, profile, at)]


def node_step(
    name: str,
    st: NodeState,
    item: NodeEvent | GpuSample | Binding | SchedulingEvent,
    at: datetime,
    *,
    rules: CardRules,
    event_id: str | None = None,
) -> tuple[list[NodeProfileUpdate], list[PeakReport]]:
    """The node-keyed half of the join: one input for node ``name``, its state updated in
    place; returns the node's profile change and any GPU memory peaks for pods."""
    peaks: list[PeakReport] = []
    if isinstance(item, SchedulingEvent):
        # a kill on a node not (or no longer) known: kept in the events, counted nowhere (a
        # re-list after a delete would otherwise leave a state behind for every gone node)
        counted = (
            None if st.node is None else system_oom_step(st.system_ooms, name, item.event, event_id)
        )
        if counted is None:
            return [], peaks
        st.system_ooms = counted
        return _refresh(name, st, at, rules), peaks
    if isinstance(item, NodeEvent):
        st.derived = None
        if item.change == "delete":
            st.node = None
            st.telemetry.clear()
            st.system_ooms = SystemOoms()
        else:
            if st.node is not None and st.node.unschedulable and not item.node.unschedulable:
                # uncordoned: the operator says the node is fine again
                st.telemetry = {
                    c: replace(t, health=t.health.acknowledged()) for c, t in st.telemetry.items()
                }
            st.node = item.node
        return _refresh(name, st, at, rules), peaks
    if isinstance(item, Binding):
        st.derived = None
        if item.task is None:
            st.bound.pop(item.key, None)
            st.peaks.pop(item.key, None)
        else:
            st.bound[item.key] = item.task
        return _refresh(name, st, at, rules), peaks
    card = (item.gpu_index, item.mig_instance)
    uids = {t.uid: key for key, t in st.bound.items() if t.uid}
    tel = telemetry_of(item, st.telemetry.get(card), uids, at=at, rules=rules)
    st.telemetry[card] = tel
    derived = st.derived
    if derived is not None:
        if item.mig_instance is not None and item.gpu_index not in derived.mig_seen:
            st.derived = None  # a card newly read as MIG instances: the numbering may move
        else:
            derived.gpus.pop(item.gpu_index, None)  # only this card's state changed
    for key, mib in tel.pods:
        # a pod not bound here (its binding not come yet, or a name the sampler guessed) has
        # no peak to keep: held, it would stay until a binding that may never come
        if key in st.bound and mib > st.peaks.get(key, -1.0):
            st.peaks[key] = mib
            peaks.append(PeakReport(key, name, mib, at))
    return (_refresh(name, st, at, rules) if st.node is not None else []), peaks


def task_step(
    key: str,
    prev: TaskProfile | None,
    item: PodEvent | SchedulingEvent,
    at: datetime,
    *,
    event_id: str | None = None,
) -> tuple[TaskProfile | None, list[TaskProfileUpdate], list[Binding]]:
    """The pod-keyed half of the join: the pod's new profile, its change, and the bindings
    its nodes must hear about."""
    if isinstance(item, SchedulingEvent):
        if prev is None:
            return prev, [], []  # about a pod not seen yet (or gone): nothing to attach it to
        new = heard(prev, item.event, at, event_id=event_id)
        if new == prev:
            return prev, [], []
        return new, [TaskProfileUpdate(key, new, at)], []
    if item.change == "delete":
        if prev is None:
            return None, [], []
        out = [TaskProfileUpdate(key, None, at)]
        binds = [Binding(prev.node, key, None, at)] if prev.node is not None else []
        return None, out, binds
    new = task_profile(item.pod, prev, at=at)
    if new == prev:
        return prev, [], []
    binds = []
    if prev is not None and prev.node is not None and prev.node != new.node:
        binds.append(Binding(prev.node, key, None, at))
    if new.node is not None:
        binds.append(Binding(new.node, key, new, at))
    binds.sort(key=lambda b: b.node)
    return new, [TaskProfileUpdate(key, new, at)], binds
