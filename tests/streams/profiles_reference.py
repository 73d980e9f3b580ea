"""The reference model of the profile property tests: strategies over a small universe of
nodes and pods, and an independent recomputation of the final profiles (its own card
allocation, not ``free_per_gpu`` or ``node_profile``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import strategies as st

from models import (
    MILLI_PER_GPU,
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
    ResourceRequest,
    SchedulerEvent,
    SchedulingEvent,
    TaskProfile,
)
from models.xid import classify_xid
from tests.models.strategies import st_aware_datetime

NAMESPACE = "default"
NODE_NAMES = ("n0", "n1", "n2")
GHOST_NODE = "n9"  # pods may name it; no node event ever creates it
POD_NAMES = tuple(f"p{i}" for i in range(6))
GPU_MODEL = "T4"
BAD_XIDS = frozenset({48, 61, 62, 64, 74, 79, 94, 95, 119, 120, 140, 154})
"""The XIDs that take a card out, written out here rather than read from the table."""
FINISHED = frozenset({PodPhase.SUCCEEDED, PodPhase.FAILED})
PHASES = (PodPhase.PENDING, PodPhase.RUNNING, PodPhase.SUCCEEDED, PodPhase.FAILED)
CREATED = datetime(2024, 1, 1, tzinfo=UTC)


# --- strategies ----------------------------------------------------------------------------


# Strategies are built once: creating them per draw dominated the run time.
_cpu = st.sampled_from([0, 500, 1000, 4000, 16000])
_mem = st.sampled_from([0, 256, 1024, 8192])
_share = st.sampled_from([100, 250, 300, 500, 700]) | st.integers(1, 999)
_request_kind = st.sampled_from(["cpu", "whole", "share"])
_pod_name = st.sampled_from(POD_NAMES)
_pod_node = st.sampled_from((None, *NODE_NAMES, *NODE_NAMES, GHOST_NODE))
_index_mode = st.sampled_from(["none", "matching", "any"])
_index = st.integers(0, 2) | st.integers(0, 8)
_phase = st.sampled_from(PHASES) | st.just(PodPhase.RUNNING)
_node_name = st.sampled_from(NODE_NAMES)
_sample_node = st.sampled_from((*NODE_NAMES, GHOST_NODE))
_xid = st.none() | st.sampled_from([0, 13, 43, 48, 63, 64, 79, 94, 95, 119, 999])
_namespace = st.none() | st.just(NAMESPACE)
_step = st.sampled_from([0, 0, 1, 7, 45])
_event_kind = st.sampled_from(["node"] * 2 + ["pod"] * 5 + ["gpu"] * 2 + ["oom"])
_node_change = st.sampled_from(["upsert"] * 3 + ["delete"])
_pod_change = st.sampled_from(["upsert"] * 4 + ["delete"])
_start = st_aware_datetime().filter(lambda t: t.year < 2099)
_whole_count = st.integers(1, 4)
_any_size = st.integers(0, 4)
_indices = {n: st.lists(_index, min_size=n, max_size=n, unique=True) for n in range(5)}
_uid = st.sampled_from(("u1", "u2"))
_priority = st.sampled_from((0, 5))
_card_count = st.integers(0, 8)
_node_cpu = st.sampled_from((0, 8000, 32000, 64000))
_node_mem = st.sampled_from((0, 16384, 65536))
_labels = st.sampled_from(({}, {"pool": "a"}))
_pool = st.none() | st.just("gpu")
_total = st.none() | st.sampled_from((16384.0, 81920.0))
_used = {
    total: st.none() | st.floats(0, total if total is not None else 1e5)
    for total in (None, 16384.0, 81920.0)
}
_gpu_index = st.integers(0, 9)
_sample_pod = st.none() | _pod_name
_oom_reason = st.sampled_from(("OOMKilled", "OOMKilled", "Evicted"))
_oom_count = st.integers(1, 3)


@st.composite
def st_request(draw: st.DrawFn) -> ResourceRequest:
    """A valid request: CPU-only, 1..4 whole cards, or a share of one card."""
    kind = draw(_request_kind)
    cpu, mem = draw(_cpu), draw(_mem)
    if kind == "cpu":
        return ResourceRequest(cpu_milli=cpu, memory_mib=mem)
    if kind == "whole":
        count = draw(_whole_count)
        return ResourceRequest(
            cpu_milli=cpu, memory_mib=mem, gpu_count=count, gpu_milli=MILLI_PER_GPU
        )
    return ResourceRequest(cpu_milli=cpu, memory_mib=mem, gpu_count=1, gpu_milli=draw(_share))


@st.composite
def st_pod(
    draw: st.DrawFn,
    names: st.SearchStrategy[str] = _pod_name,
    nodes: st.SearchStrategy[str | None] = _pod_node,
) -> Pod:
    requests = draw(_request)
    node = draw(nodes)
    size = 0
    if node is not None:
        mode = draw(_index_mode)
        if mode == "matching":  # the right length; may still point past the node's last card
            size = requests.gpu_count
        elif mode == "any":
            size = draw(_any_size)
    indices = draw(_indices[size])
    return Pod(
        namespace=NAMESPACE,
        name=draw(names),
        uid=draw(_uid),
        phase=draw(_phase),
        node=node,
        requests=requests,
        gpu_indices=tuple(indices),
        priority=draw(_priority),
        created_at=CREATED,
    )


@st.composite
def st_node(draw: st.DrawFn) -> Node:
    count = draw(_card_count)
    return Node(
        name=draw(_node_name),
        cpu_milli=draw(_node_cpu),
        memory_mib=draw(_node_mem),
        gpu_model=GPU_MODEL if count else None,
        gpu_count=count,
        labels=draw(_labels),
        unschedulable=draw(st.booleans()),
        pool=draw(_pool),
    )


@st.composite
def st_sample(draw: st.DrawFn) -> GpuSample:
    total = draw(_total)
    used = draw(_used[total])
    return GpuSample(
        node=draw(_sample_node),
        gpu_index=draw(_gpu_index),
        memory_total_mib=total,
        memory_used_mib=used,
        xid=draw(_xid),
        pod=draw(_sample_pod),
        namespace=draw(_namespace),
    )


@st.composite
def st_scheduling(draw: st.DrawFn) -> SchedulerEvent:
    return SchedulerEvent(
        reason=draw(_oom_reason),
        message="",
        pod_namespace=draw(_namespace),
        pod_name=draw(_sample_pod),
        count=draw(_oom_count),
    )


_request = st_request()
_payloads: dict[str, st.SearchStrategy[Any]] = {
    "node": st.builds(NodeEvent, change=_node_change, node=st_node()),
    "pod": st.builds(PodEvent, change=_pod_change, pod=st_pod()),
    "gpu": st.builds(GpuSampleEvent, sample=st_sample()),
    "oom": st.builds(SchedulingEvent, event=st_scheduling()),
}


@st.composite
def st_events(draw: st.DrawFn) -> list[Envelope]:
    """Up to 60 events of every kind, event times non-decreasing (often equal)."""
    at = draw(_start)
    out = []
    for _ in range(draw(st.integers(0, 60))):
        at = at + timedelta(seconds=draw(_step))
        payload = draw(_payloads[draw(_event_kind)])
        out.append(Envelope.wrap(payload, event_time=at, source="test"))
    return out


# --- reference ---------------------------------------------------------------------------


@dataclass
class RefTask:
    pod: Pod
    bound_at: datetime | None = None
    finished_at: datetime | None = None
    oom_count: int = 0
    peak: float | None = None
    """Its GPU memory peak on its node: kept by the node's half, not in the profile."""
    counted: list[str] = field(default_factory=list)  # OOM event ids, each kill once


RECOVER_S = 60.0
"""The join's recovery time in these properties: short, so that some sequences recover."""


@dataclass
class RefCard:
    memory_total_mib: float | None = None
    memory_used_mib: float | None = None
    last_xid: int | None = None
    pods: dict[str, float] = field(default_factory=dict)
    # health, for samples with an XID gauge only (no counts): a fatal code other than the
    # last one read takes the card out; it comes back RECOVER_S after, once the gauge no
    # longer reads a fatal code, or at an uncordon
    seen_xid: int | None = None
    fault_code: int | None = None
    fault_since: datetime | None = None
    fault_last: datetime | None = None

    def read(self, xid: int | None, at: datetime) -> None:
        if xid in BAD_XIDS and xid != self.seen_xid:
            self.fault_code, self.fault_last = xid, at
            self.fault_since = self.fault_since or at
        elif (
            self.fault_last is not None
            and (at - self.fault_last).total_seconds() >= RECOVER_S
            and xid not in BAD_XIDS
        ):
            self.clear()
        self.seen_xid = xid or None

    def clear(self) -> None:
        self.fault_code = self.fault_since = self.fault_last = None


@dataclass
class Reference:
    """The final objects: present nodes, live tasks, telemetry since a node's last delete."""

    nodes: dict[str, Node] = field(default_factory=dict)
    tasks: dict[str, RefTask] = field(default_factory=dict)
    cards: dict[str, dict[int, RefCard]] = field(default_factory=dict)


def final_state(events: list[Envelope]) -> Reference:
    ref = Reference()
    for env in events:
        at, p = env.event_time, env.payload
        if isinstance(p, NodeEvent):
            if p.change == "upsert":
                before = ref.nodes.get(p.node.name)
                if before is not None and before.unschedulable and not p.node.unschedulable:
                    for c in ref.cards.get(p.node.name, {}).values():
                        c.clear()  # uncordoned
                ref.nodes[p.node.name] = p.node
            else:
                ref.nodes.pop(p.node.name, None)
                ref.cards.pop(p.node.name, None)  # a removed node's telemetry is dropped
        elif isinstance(p, PodEvent):
            key = f"{p.pod.namespace}/{p.pod.name}"
            if p.change == "delete":
                ref.tasks.pop(key, None)
                continue
            task = ref.tasks.setdefault(key, RefTask(pod=p.pod))
            if task.pod.node != p.pod.node:
                task.peak = None  # left the node that measured it: a new node starts afresh
            task.pod = p.pod
            if p.pod.node is not None and task.bound_at is None:
                task.bound_at = at
            if p.pod.phase in FINISHED and task.finished_at is None:
                task.finished_at = at
        elif isinstance(p, GpuSampleEvent):
            s = p.sample
            card = ref.cards.setdefault(s.node, {}).setdefault(s.gpu_index, RefCard())
            card.memory_total_mib = s.memory_total_mib
            card.memory_used_mib = s.memory_used_mib
            if s.xid:
                card.last_xid = s.xid
            card.read(s.xid, at)
            card.pods = {}
            if s.pod is not None and s.memory_used_mib is not None:
                card.pods = {f"{s.namespace or NAMESPACE}/{s.pod}": s.memory_used_mib}
            t = ref.tasks.get(f"{s.namespace or NAMESPACE}/{s.pod}") if s.pod else None
            # a peak only for a pod bound to the sample's node (the node's stage knows no other)
            if t is not None and t.pod.node == s.node and s.memory_used_mib is not None:
                t.peak = s.memory_used_mib if t.peak is None else max(t.peak, s.memory_used_mib)
        else:
            e = p.event
            t = ref.tasks.get(f"{e.pod_namespace or NAMESPACE}/{e.pod_name}")
            # a kill seen again (same event id) is not counted again
            seen = t is not None and env.id in t.counted[-16:]
            if e.reason == "OOMKilled" and e.pod_name and t is not None and not seen:
                t.oom_count += e.count
                t.counted.append(env.id)
    return ref


def expected_task(key: str, t: RefTask) -> TaskProfile:
    pod = t.pod
    assert key == pod.key
    return TaskProfile.of_pod(
        pod,
        bound_at=t.bound_at,
        finished_at=t.finished_at,
        oom_count=t.oom_count,
        counted_ooms=tuple(t.counted[-16:]),
    )


def reference_free(cards: int, held: list[tuple[str, Pod]]) -> tuple[list[int], list[set[str]]]:
    """Per-card free share and the pods on each card: known devices charged first (clamped
    at 0), then the rest laid out largest share first, each card the tightest one with room
    (lowest index on ties)."""
    used = [0] * cards
    on: list[set[str]] = [set() for _ in range(cards)]
    laid: list[tuple[str, Pod]] = []
    for key, pod in held:
        r = pod.requests
        if r.gpu_count == 0:
            continue
        idx = pod.gpu_indices
        if len(idx) == r.gpu_count and all(i < cards for i in idx):
            for i in idx:
                used[i] += r.gpu_milli
                on[i].add(key)
        else:
            laid.append((key, pod))
    free = [max(0, MILLI_PER_GPU - u) for u in used]
    laid.sort(key=lambda kp: (-kp[1].requests.gpu_milli, -kp[1].requests.gpu_count, kp[0]))
    for key, pod in laid:
        milli = pod.requests.gpu_milli
        for _ in range(pod.requests.gpu_count):
            best = -1
            for i in range(cards):
                if free[i] >= milli and (best < 0 or free[i] < free[best]):
                    best = i
            if best >= 0:
                free[best] -= milli
                on[best].add(key)
    return free, on


def expected_node(node: Node, ref: Reference) -> dict[str, Any]:
    held = sorted(
        (k, t.pod)
        for k, t in ref.tasks.items()
        if t.pod.node == node.name and t.pod.phase not in FINISHED
    )
    free, on = reference_free(node.gpu_count, held)
    cards = ref.cards.get(node.name, {})
    gpus = []
    for i, milli in enumerate(free):
        c = cards.get(i, RefCard())
        gpus.append(
            GpuState(
                index=i,
                milli_free=milli,
                units_free=milli,
                pods=tuple(sorted(on[i])),
                pod_memory_mib=c.pods,
                memory_total_mib=c.memory_total_mib,
                memory_used_mib=c.memory_used_mib,
                healthy=c.fault_code is None,
                last_xid=c.last_xid,
                fault=(
                    None
                    if c.fault_code is None
                    else f"XID {c.fault_code}: {classify_xid(c.fault_code).meaning}"
                ),
                fault_code=c.fault_code,
                fault_since=c.fault_since,
            )
        )
    profile = NodeProfile(
        name=node.name,
        gpu_model=node.gpu_model,
        gpus=tuple(gpus),
        cpu_milli_allocatable=node.cpu_milli,
        cpu_milli_requested=sum(p.requests.cpu_milli for _, p in held),
        memory_mib_allocatable=node.memory_mib,
        memory_mib_requested=sum(p.requests.memory_mib for _, p in held),
        labels=node.labels,
        taints=node.taints,
        pool=node.pool,
        unschedulable=node.unschedulable,
        pods=tuple(k for k, _ in held),
        updated_at=datetime.fromisoformat("2000-01-01T00:00:00+00:00"),
    )
    return without_time(profile)


def without_time(profile: NodeProfile) -> dict[str, Any]:
    return profile.model_dump(exclude={"updated_at"})
