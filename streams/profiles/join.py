"""The profile join's steps: one pod's or one node's input folded into its state.

The join keeps the latest node objects, a task profile per pod, and the latest GPU telemetry
per card, and re-derives a node's profile from those whenever any of them changes. The
derivation is a pure function (``node_profile``), so a profile after any event sequence equals
the profile computed from scratch from the final objects.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime

from models import (
    GpuSample,
    GpuState,
    Node,
    NodeEvent,
    NodeProfile,
    Pod,
    PodEvent,
    PodPhase,
    QueueObject,
    SchedulerEvent,
    SchedulingEvent,
    TaskProfile,
)
from models.cards import SharingMode
from streams.profiles.card_layout import LaidCard, lay_cards
from streams.profiles.health import CardHealth, health_step
from streams.profiles.heard import heard, waits
from streams.profiles.quiet import QuietRules, QuietRun, quiet_step
from streams.profiles.system_oom import SystemOoms, system_oom_step

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


ProfileUpdate = NodeProfileUpdate | TaskProfileUpdate | QueueUpdate | QuotaRefused


@dataclass(frozen=True, slots=True, kw_only=True)
class CardRules:
    """What the join decides about a card from its readings over time, from the settings."""

    recover_after_s: float
    quiet: QuietRules


@dataclass(frozen=True, slots=True)
class GpuTelemetry:
    memory_total_mib: float | None
    memory_used_mib: float | None
    last_xid: int | None
    pods: tuple[tuple[str, float], ...] = ()
    """(pod key, MiB) of each pod the reading names with its own figure: per-process memory
    on a shared card, or the one pod of a card or MIG instance."""
    health: CardHealth = field(default_factory=CardHealth)
    quiet: QuietRun | None = None


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


CardKey = tuple[int, int | None]
"""(card index, MIG instance): each MIG instance reports its own memory, so keyed by the card
alone the last instance read overwrote the others (9,216 of a card holding 40,960 MiB)."""


def card_telemetry(telemetry: dict[CardKey, GpuTelemetry], index: int) -> GpuTelemetry | None:
    """One card's figures: its own reading, or the sum over its MIG instances (a card
    partitioned into instances has memory only in them)."""
    whole = telemetry.get((index, None))
    parts = [
        t for (i, m), t in sorted(telemetry.items(), key=_order) if i == index and m is not None
    ]
    if not parts:
        return whole
    xids = [t.last_xid for t in parts if t.last_xid is not None]
    pods: dict[str, float] = {}
    for t in parts:
        for key, mib in t.pods:
            pods[key] = pods.get(key, 0.0) + mib
    return GpuTelemetry(
        memory_total_mib=_sum(t.memory_total_mib for t in parts),
        memory_used_mib=_sum(t.memory_used_mib for t in parts),
        last_xid=whole.last_xid if whole and whole.last_xid else (xids[-1] if xids else None),
        pods=tuple(sorted(pods.items())),
        health=next(
            (t.health for t in ([whole] if whole else []) + parts if t.health.faulted),
            whole.health if whole else CardHealth(),
        ),
        quiet=None,  # a card in MIG instances is shared: not one pod's to leave idle
    )


def _order(item: tuple[CardKey, GpuTelemetry]) -> tuple[int, int]:
    (index, mig), _ = item
    return index, -1 if mig is None else mig


def _sum(values: Iterable[float | None]) -> float | None:
    # unknown stays unknown: a sum over instances with one unread would understate the card
    known = list(values)
    return (
        None
        if not known or any(v is None for v in known)
        else sum(v for v in known if v is not None)
    )


def _instances(telemetry: dict[CardKey, GpuTelemetry], index: int) -> dict[int, float]:
    return {
        m: t.memory_used_mib
        for (i, m), t in sorted(telemetry.items(), key=_order)
        if i == index and m is not None and t.memory_used_mib is not None
    }


def _numbered(
    cards: tuple[LaidCard, ...], telemetry: dict[CardKey, GpuTelemetry]
) -> list[LaidCard]:
    """The cards under their physical indices. The node does not say which of its cards are
    split into MIG instances, so the layout puts the whole ones first; readings of instances
    say which cards are MIG, and when they name exactly as many cards as there are, those
    indices go to the MIG cards and the rest, in order, to the whole ones."""
    mig = [c for c in cards if c.mode is SharingMode.MIG]
    whole = [c for c in cards if c.mode is not SharingMode.MIG]
    seen = sorted({i for i, m in telemetry if m is not None})
    if not mig or not whole or len(seen) != len(mig) or seen[-1] >= len(cards):
        return list(cards)
    rest = [i for i in range(len(cards)) if i not in seen]
    out = [replace(c, index=i) for c, i in zip(whole, rest, strict=True)]
    out += [replace(c, index=i) for c, i in zip(mig, seen, strict=True)]
    return sorted(out, key=lambda c: c.index)


def holds_resources(task: TaskProfile) -> bool:
    """Bound and not finished: what the scheduler counts against a node."""
    return task.node is not None and task.phase not in TERMINAL_PHASES


def node_profile(
    node: Node,
    tasks: list[TaskProfile],
    telemetry: dict[CardKey, GpuTelemetry],
    *,
    at: datetime,
    system_ooms: SystemOoms | None = None,
    rules: CardRules | None = None,
) -> NodeProfile:
    """A node's profile from its object, the tasks bound to it and its cards' telemetry."""
    held = sorted((t for t in tasks if holds_resources(t)), key=lambda t: t.key)
    bound = {t.key: t.bound_at for t in held if t.bound_at is not None}
    layout = lay_cards(node, [(t.key, t.requests, t.gpu_indices) for t in held])
    gpus = []
    for card in _numbered(layout.cards, telemetry):
        tel = card_telemetry(telemetry, card.index)
        health = tel.health if tel else CardHealth()
        quiet = _held_by(tel.quiet if tel else None, card.pods, bound, rules)
        total = tel.memory_total_mib if tel and tel.memory_total_mib else card.memory_total_mib
        gpus.append(
            GpuState(
                index=card.index,
                milli_free=card.milli_free,
                mode=card.mode,
                units=card.units,
                units_free=card.free,
                mig_free={p: n for p, n in card.mig_free.items() if n},
                mig_used={p: n for p, n in card.mig_used.items() if n},
                memory_free_mib=card.memory_free_mib,
                slots_free=card.slots_free if card.mode is SharingMode.HAMI else None,
                pods=tuple(card.pods),
                pod_memory_mib=dict(tel.pods) if tel else {},
                memory_total_mib=total,
                memory_used_mib=tel.memory_used_mib if tel else None,
                instance_memory_used_mib=_instances(telemetry, card.index),
                healthy=not health.faulted and not node.problems,
                last_xid=tel.last_xid if tel else None,
                fault=health.fault,
                fault_code=health.code,
                fault_since=health.since,
                quiet_since=quiet.since if quiet else None,
                quiet_held=bool(quiet and quiet.held),
                quiet_peak_mib=quiet.peak_mib if quiet else None,
                quiet_peak_activity_pct=round(quiet.peak_activity_pct, 1) if quiet else None,
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
        problems=node.problems,
        mig_device_profile=node.mig_device_profile,
        gpu_shared_resource=node.gpu_shared_resource,
        pods=tuple(t.key for t in held),
        system_oom_count=system_ooms.count if system_ooms else 0,
        last_system_oom=system_ooms.last_victim if system_ooms else None,
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
    return TaskProfile.of_pod(
        pod,
        bound_at=bound_at,
        finished_at=finished_at,
        gpu_memory_peak_mib=previous.gpu_memory_peak_mib if previous else None,
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
    """GPU memory a pod was seen using, sent from the node's stage to the pod's. Keyed by pod."""

    key: str
    used_mib: float
    at: datetime


@dataclass(slots=True)
class NodeState:
    """Everything the node-keyed stage keeps for one node."""

    node: Node | None = None
    bound: dict[str, TaskProfile] = field(default_factory=dict)
    telemetry: dict[CardKey, GpuTelemetry] = field(default_factory=dict)
    profile: NodeProfile | None = None
    system_ooms: SystemOoms = field(default_factory=SystemOoms)

    @property
    def empty(self) -> bool:
        return self.node is None and not self.bound and not self.telemetry


def _held_by(
    run: QuietRun | None,
    pods: Iterable[str],
    bound: dict[str, datetime],
    rules: CardRules | None,
) -> QuietRun | None:
    """The card's quiet run as its holders' own: a pod bound to a card that was already quiet
    has been quiet only since it was bound (it may still be loading), so the run counts from
    the latest binding and is held once that much of it spans the window (without ``rules``,
    not held then)."""
    latest = max((bound[p] for p in pods if p in bound), default=None)
    if run is None or latest is None or latest <= run.since:
        return run
    spans = (run.last_at - latest).total_seconds()
    return replace(run, since=latest, held=rules is not None and spans >= rules.quiet.window_s)


def _refresh(
    name: str, st: NodeState, at: datetime, rules: CardRules | None = None
) -> list[NodeProfileUpdate]:
    if st.node is None:
        if st.profile is None:
            return []
        st.profile = None
        return [NodeProfileUpdate(name, None, at)]
    profile = node_profile(
        st.node,
        list(st.bound.values()),
        st.telemetry,
        at=at,
        system_ooms=st.system_ooms,
        rules=rules,
    )
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
        if item.task is None:
            st.bound.pop(item.key, None)
        else:
            st.bound[item.key] = item.task
        return _refresh(name, st, at, rules), peaks
    card = (item.gpu_index, item.mig_instance)
    uids = {t.uid: key for key, t in st.bound.items() if t.uid}
    tel = telemetry_of(item, st.telemetry.get(card), uids, at=at, rules=rules)
    st.telemetry[card] = tel
    peaks.extend(PeakReport(key, mib, at) for key, mib in tel.pods)
    return (_refresh(name, st, at, rules) if st.node is not None else []), peaks


def task_step(
    key: str,
    prev: TaskProfile | None,
    item: PodEvent | SchedulingEvent | PeakReport,
    at: datetime,
    *,
    event_id: str | None = None,
) -> tuple[TaskProfile | None, list[TaskProfileUpdate], list[Binding]]:
    """The pod-keyed half of the join: the pod's new profile, its change, and the bindings
    its nodes must hear about."""
    if isinstance(item, PeakReport):
        if prev is None or (
            prev.gpu_memory_peak_mib is not None and item.used_mib <= prev.gpu_memory_peak_mib
        ):
            return prev, [], []
        new = prev.model_copy(update={"gpu_memory_peak_mib": item.used_mib})
        return new, [TaskProfileUpdate(key, new, at)], []
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
