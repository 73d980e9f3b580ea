"""Hypothesis strategies for every model; shared by other packages' tests.

Each strategy draws only valid instances (the validators' rules are mirrored here), so a
failing round trip points at serialization, not at the generator.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from hypothesis import strategies as st
from pydantic import JsonValue

from models import (
    KNOWN_GPU_MODELS,
    MILLI_PER_GPU,
    Action,
    ActionKind,
    ActionMode,
    ActionOutcome,
    Envelope,
    EventKind,
    GangRef,
    GpuSample,
    GpuSampleEvent,
    GpuState,
    Node,
    NodeEvent,
    NodeProfile,
    OwnerRef,
    PayloadModel,
    Pod,
    PodEvent,
    PodPhase,
    QosClass,
    QueueEvent,
    QueueObject,
    QueueSourceKind,
    ResourceRequest,
    SchedulerEvent,
    SchedulingEvent,
    Scope,
    Severity,
    Signal,
    SignalKind,
    Taint,
    TaskProfile,
    WorkloadKind,
    fingerprint_of,
)
from models.actions import ANSWERED_BY_THE_CLUSTER
from models.bounds import CPU_MILLI_MAX, GPU_MEMORY_MIB_MAX, MEMORY_MIB_MAX, MIG_DEVICES_MAX
from models.cards import SharingMode, card_slices, mig_profile_slices
from models.scheduler import (
    SCHEDULER_REASONS_MAX,
    SCHEDULER_TEXT_MAX,
    PendingVerdict,
    Preemption,
)

__all__ = [
    "st_action",
    "st_aware_datetime",
    "st_envelope",
    "st_gpu_model",
    "st_gpu_sample",
    "st_json_value",
    "st_name",
    "st_node",
    "st_node_profile",
    "st_payload",
    "st_pod",
    "st_queue_object",
    "st_resource_request",
    "st_scheduler_event",
    "st_signal",
    "st_task_profile",
]

GPU_MODELS = sorted(KNOWN_GPU_MODELS)
MIG_PROFILES = ["1g.5gb", "1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"]

_name = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,14}[a-z0-9])?", fullmatch=True)
_gpu_model = st.sampled_from(GPU_MODELS)
_cpu = st.integers(min_value=0, max_value=CPU_MILLI_MAX)
_mem = st.integers(min_value=0, max_value=MEMORY_MIB_MAX)
_gpu_mem = st.integers(min_value=0, max_value=GPU_MEMORY_MIB_MAX)
_mig = st.integers(min_value=0, max_value=MIG_DEVICES_MAX)
_opt_text = st.none() | st.text(max_size=20)
_finite = st.floats(allow_nan=False, allow_infinity=False)


def st_name() -> st.SearchStrategy[str]:
    """A DNS-label-like name (node, pod, namespace)."""
    return _name


def st_gpu_model() -> st.SearchStrategy[str]:
    return _gpu_model


def st_aware_datetime() -> st.SearchStrategy[datetime]:
    """Aware datetimes in assorted fixed offsets (the models normalise them to UTC)."""
    zones = st.sampled_from(
        [UTC, timezone(timedelta(hours=8)), timezone(timedelta(hours=-5, minutes=-30))]
    )
    return st.datetimes(
        min_value=datetime(1971, 1, 1), max_value=datetime(2100, 1, 1), timezones=zones
    )


def st_json_value() -> st.SearchStrategy[JsonValue]:
    """JSON values orjson can carry: finite floats, 64-bit ints."""
    leaves: st.SearchStrategy[JsonValue] = (
        st.none()
        | st.booleans()
        | st.integers(min_value=-(2**63), max_value=2**63 - 1)
        | _finite
        | st.text(max_size=10)
    )
    return st.recursive(
        leaves,
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
        ),
        max_leaves=8,
    )


_evidence = st.dictionaries(st.text(max_size=8), st_json_value(), max_size=4)


@st.composite
def st_resource_request(draw: st.DrawFn) -> ResourceRequest:
    gpu_count = draw(st.sampled_from([0, 0, 1, 1, 2, 4, 8]))
    if gpu_count == 0:
        gpu_milli = 0
    elif gpu_count == 1:
        gpu_milli = draw(st.integers(min_value=1, max_value=MILLI_PER_GPU))
    else:
        gpu_milli = MILLI_PER_GPU
    has_gpu = gpu_count > 0
    return ResourceRequest(
        cpu_milli=draw(_cpu),
        memory_mib=draw(_mem),
        gpu_count=gpu_count,
        gpu_milli=gpu_milli,
        mig=draw(st.dictionaries(st.sampled_from(MIG_PROFILES), _mig, max_size=2)),
        gpu_memory_mib=draw(st.none() | _gpu_mem) if has_gpu else None,
        gpu_cores_pct=draw(st.none() | st.integers(0, 100)) if has_gpu else None,
    )


@st.composite
def st_pod(draw: st.DrawFn, phase: PodPhase | None = None) -> Pod:
    node = draw(st.none() | _name)
    indices: tuple[int, ...] = ()
    if node is not None:
        indices = tuple(draw(st.lists(st.integers(0, 15), max_size=8, unique=True)))
    return Pod(
        namespace=draw(_name),
        name=draw(_name),
        uid=draw(st.uuids().map(str)),
        phase=phase or draw(st.sampled_from(PodPhase)),
        node=node,
        requests=draw(st_resource_request()),
        gpu_models=tuple(draw(st.lists(_gpu_model, max_size=3))),
        gpu_indices=indices,
        gpu_memory_limit_mib=draw(st.none() | st.integers(1, 81_920)),
        priority=draw(st.integers(min_value=-(2**31), max_value=2**31 - 1)),
        queue=draw(st.none() | _name),
        tenant=draw(st.none() | _name),
        owner=draw(
            st.none()
            | st.builds(OwnerRef, kind=st.sampled_from(["Job", "StatefulSet"]), name=_name)
        ),
        qos=draw(st.none() | st.sampled_from(QosClass)),
        gang=draw(st.none() | st.builds(GangRef, name=_name, min_member=st.integers(1, 64))),
        workload_kind=draw(st.sampled_from(WorkloadKind)),
        preemptible=draw(st.booleans()),
        created_at=draw(st_aware_datetime()),
    )


_taint = st.builds(
    Taint,
    key=_name,
    value=st.none() | _name,
    effect=st.sampled_from(["NoSchedule", "PreferNoSchedule", "NoExecute"]),
)


@st.composite
def st_node(draw: st.DrawFn) -> Node:
    gpu_count = draw(st.sampled_from([0, 1, 2, 4, 8]))
    mig = draw(st.dictionaries(st.sampled_from(MIG_PROFILES), _mig, max_size=2))
    if gpu_count > 0:
        model: str | None = draw(_gpu_model)
    elif mig:
        model = draw(st.none() | _gpu_model)
    else:
        model = None
    mig = {p: n for p, n in mig.items() if mig_profile_slices(p) <= card_slices(model)}
    return Node(
        name=draw(_name),
        cpu_milli=draw(_cpu),
        memory_mib=draw(_mem),
        gpu_model=model,
        gpu_count=gpu_count,
        gpu_memory_mib=draw(st.none() | _gpu_mem),
        gpu_replicas=draw(st.integers(1, 16)),
        gpu_sharing=draw(st.none() | st.sampled_from(list(SharingMode))),
        mig_devices=mig,
        mig_cards=draw(st.integers(0, 8)),
        labels=draw(st.dictionaries(_name, st.text(max_size=10), max_size=3)),
        taints=tuple(draw(st.lists(_taint, max_size=2))),
        unschedulable=draw(st.booleans()),
        pool=draw(st.none() | _name),
    )


_scheduler_event = st.builds(
    SchedulerEvent,
    reason=st.sampled_from(
        ["FailedScheduling", "Preempted", "Scheduled", "Evicted", "SystemOOM", "OOMKilled"]
    ),
    message=st.text(max_size=60),
    pod_namespace=st.none() | _name,
    pod_name=st.none() | _name,
    pod_uid=st.none() | st.uuids().map(str),
    node=st.none() | _name,
    count=st.integers(1, 1000),
)


@st.composite
def st_gpu_sample(draw: st.DrawFn) -> GpuSample:
    nonneg = st.floats(0, GPU_MEMORY_MIB_MAX, allow_nan=False, allow_infinity=False)
    total = draw(st.none() | nonneg)
    used = draw(st.none() | (nonneg if total is None else st.floats(0, total)))
    return GpuSample(
        node=draw(_name),
        gpu_index=draw(st.integers(0, 15)),
        uuid=draw(st.none() | st.uuids().map(lambda u: f"GPU-{u}")),
        model=draw(st.none() | st.sampled_from(["NVIDIA H200", "Tesla T4"])),
        memory_total_mib=total,
        memory_used_mib=used,
        memory_reserved_mib=draw(st.none() | nonneg),
        utilization_pct=draw(st.none() | st.floats(0, 100)),
        engine_active=draw(st.none() | st.floats(0, 1)),
        xid=draw(st.none() | st.sampled_from([13, 31, 43, 45, 48, 63, 64, 74, 79, 94, 95])),
        mig_profile=draw(st.none() | st.sampled_from(MIG_PROFILES)),
        mig_instance=draw(st.none() | st.integers(0, 7)),
        pod=draw(st.none() | _name),
        namespace=draw(st.none() | _name),
        container=draw(st.none() | _name),
    )


def st_scheduler_event() -> st.SearchStrategy[SchedulerEvent]:
    return _scheduler_event


_change = st.sampled_from(["upsert", "delete"])
_amounts = st.dictionaries(
    st.sampled_from(["nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "nvidia.com/gpumem"]),
    st.floats(min_value=0, max_value=1e6, allow_nan=False, allow_infinity=False),
    max_size=3,
)


@st.composite
def st_queue_object(draw: st.DrawFn) -> QueueObject:
    kind = draw(st.sampled_from(QueueSourceKind))
    cluster_scoped = kind in (QueueSourceKind.CLUSTER_QUEUE, QueueSourceKind.VOLCANO_QUEUE)
    return QueueObject(
        source_kind=kind,
        namespace=None if cluster_scoped else draw(_name),
        name=draw(_name),
        uid=draw(st.text(max_size=8)),
        parent=draw(st.none() | _name),
        cohort=draw(st.none() | _name),
        nominal=draw(_amounts),
        limit=draw(_amounts),
        used=draw(_amounts),
        requested=draw(_amounts),
        min_member=draw(st.none() | st.integers(1, 64)),
        state=draw(st.none() | st.sampled_from(["Pending", "Running", "Open", "Admitted"])),
        pending=draw(st.none() | st.integers(0, 1000)),
        admitted=draw(st.none() | st.integers(0, 1000)),
    )


def st_payload(kind: EventKind | None = None) -> st.SearchStrategy[PayloadModel]:
    """A payload of `kind`, or of any kind when None."""
    by_kind: dict[EventKind, st.SearchStrategy[PayloadModel]] = {
        EventKind.POD: st.builds(PodEvent, change=_change, pod=st_pod()),
        EventKind.NODE: st.builds(NodeEvent, change=_change, node=st_node()),
        EventKind.SCHEDULER: st.builds(SchedulingEvent, event=_scheduler_event),
        EventKind.GPU_SAMPLE: st.builds(GpuSampleEvent, sample=st_gpu_sample()),
        EventKind.QUEUE: st.builds(QueueEvent, change=_change, queue=st_queue_object()),
    }
    if kind is not None:
        return by_kind[kind]
    return st.one_of(*by_kind.values())


@st.composite
def st_envelope(draw: st.DrawFn, kind: EventKind | None = None) -> Envelope:
    """An envelope built with Envelope.wrap, sometimes with an explicit id."""
    return Envelope.wrap(
        draw(st_payload(kind)),
        event_time=draw(st_aware_datetime()),
        source=draw(st.sampled_from(["kube", "dcgm", "nvml", "trace:openb"])),
        id=draw(st.none() | st.text(min_size=1, max_size=40)),
    )


@st.composite
def st_signal(draw: st.DrawFn) -> Signal:
    kind = draw(st.sampled_from(SignalKind))
    scope = draw(st.sampled_from(Scope))
    scope_id = draw(_name)
    opened = draw(st_aware_datetime())
    resolved = draw(st.none() | st.timedeltas(min_value=timedelta(0), max_value=timedelta(30)))
    return Signal(
        kind=kind,
        scope=scope,
        scope_id=scope_id,
        severity=draw(st.sampled_from(Severity)),
        fingerprint=fingerprint_of(kind, scope, scope_id, *draw(st.lists(st.text(max_size=5)))),
        summary=draw(st.text(max_size=40)),
        evidence=draw(_evidence),
        opened_at=opened,
        resolved_at=None if resolved is None else opened + resolved,
        state="open" if resolved is None else "resolved",
    )


@st.composite
def st_action(draw: st.DrawFn) -> Action:
    mode = draw(st.sampled_from(ActionMode))
    outcomes = [
        o
        for o in ActionOutcome
        if not (mode is ActionMode.DRY_RUN and o in ANSWERED_BY_THE_CLUSTER)
    ]
    return Action(
        id=draw(st.uuids().map(str)),
        kind=draw(st.sampled_from(ActionKind)),
        mode=mode,
        outcome=draw(st.sampled_from(outcomes)),
        target_scope=draw(st.sampled_from(Scope)),
        target=draw(_name),
        signal_fingerprint=draw(st.none() | st.from_regex(r"[0-9a-f]{16}", fullmatch=True)),
        reason=draw(st.text(max_size=40)),
        evidence=draw(_evidence),
        created_at=draw(st_aware_datetime()),
    )


_gpu_state = st.builds(
    GpuState,
    index=st.integers(0, 15),
    milli_free=st.integers(0, MILLI_PER_GPU),
    memory_total_mib=st.none() | st.floats(0, 1e6),
    memory_used_mib=st.none() | st.floats(0, 1e6),
    healthy=st.booleans(),
    last_xid=st.none() | st.integers(0, 200),
)


@st.composite
def st_node_profile(draw: st.DrawFn) -> NodeProfile:
    gpus = draw(st.lists(_gpu_state, max_size=8, unique_by=lambda g: g.index))
    return NodeProfile(
        name=draw(_name),
        gpu_model=draw(_gpu_model) if gpus else draw(st.none() | _gpu_model),
        gpus=tuple(gpus),
        cpu_milli_allocatable=draw(_cpu),
        cpu_milli_requested=draw(_cpu),
        memory_mib_allocatable=draw(_mem),
        memory_mib_requested=draw(_mem),
        labels=draw(st.dictionaries(_name, _name, max_size=3)),
        taints=tuple(draw(st.lists(_taint, max_size=2))),
        pool=draw(st.none() | _name),
        unschedulable=draw(st.booleans()),
        pods=tuple(draw(st.lists(st.tuples(_name, _name).map("/".join), unique=True, max_size=5))),
        updated_at=draw(st_aware_datetime()),
    )


@st.composite
def st_task_profile(draw: st.DrawFn) -> TaskProfile:
    pod = draw(st_pod())
    bound = draw(st.none() | st.timedeltas(min_value=timedelta(0), max_value=timedelta(days=3)))
    return TaskProfile.of_pod(
        pod,
        bound_at=None if bound is None else pod.created_at + bound,
        finished_at=draw(st.none() | st_aware_datetime()),
        gpu_memory_peak_mib=draw(st.none() | st.floats(0, 1e6)),
        oom_count=draw(st.integers(0, 100)),
        scheduler=draw(st.none() | st_pending_verdict()),
        preemptions=draw(st.integers(0, 5)),
        preempted=draw(st.none() | st_preemption()),
    )


_scheduler_text = st.text(max_size=SCHEDULER_TEXT_MAX)


@st.composite
def st_pending_verdict(draw: st.DrawFn) -> PendingVerdict:
    """A FailedScheduling verdict as a task profile keeps it: read, or kept as text."""
    if draw(st.booleans()):
        return PendingVerdict(at=draw(st_aware_datetime()), message=draw(_scheduler_text))
    return PendingVerdict(
        at=draw(st_aware_datetime()),
        nodes=draw(st.integers(0, 10_000)),
        reasons=draw(
            st.dictionaries(_scheduler_text, st.integers(0, 10_000), max_size=SCHEDULER_REASONS_MAX)
        ),
    )


@st.composite
def st_preemption(draw: st.DrawFn) -> Preemption:
    return Preemption(
        at=draw(st_aware_datetime()),
        by=draw(st.none() | _scheduler_text),
        node=draw(st.none() | _scheduler_text),
        message=draw(st.none() | _scheduler_text),
    )
