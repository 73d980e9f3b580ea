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
    Envelope,
    EventKind,
    GangRef,
    GpuSample,
    GpuSampleEvent,
    Node,
    NodeEvent,
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
    Taint,
    WorkloadKind,
)
from models.bounds import CPU_MILLI_MAX, GPU_MEMORY_MIB_MAX, MEMORY_MIB_MAX, MIG_DEVICES_MAX
from models.cards import SharingMode, card_slices, mig_profile_slices

__all__ = [
    "st_aware_datetime",
    "st_envelope",
    "st_gpu_model",
    "st_gpu_sample",
    "st_json_value",
    "st_name",
    "st_node",
    "st_payload",
    "st_pod",
    "st_queue_object",
    "st_resource_request",
    "st_scheduler_event",
    "st_taints",
]

GPU_MODELS = sorted(KNOWN_GPU_MODELS)
MIG_PROFILES = ["1g.5gb", "1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"]

_name = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,14}[a-z0-9])?", fullmatch=True)
_gpu_model = st.sampled_from(GPU_MODELS)
_cpu = st.integers(min_value=0, max_value=CPU_MILLI_MAX)
_mem = st.integers(min_value=0, max_value=MEMORY_MIB_MAX)
_gpu_mem = st.integers(min_value=0, max_value=GPU_MEMORY_MIB_MAX)
_mig = st.integers(min_value=0, max_value=MIG_DEVICES_MAX)
_finite = st.floats(allow_nan=False, allow_infinity=False)


def st_name() -> st.SearchStrategy[str]:
    """A DNS-label-like name (node, pod, namespace)."""
    return _name


def st_gpu_model() -> st.SearchStrategy[str]:
    return _gpu_model


_aware_datetime = st.datetimes(
    min_value=datetime(1971, 1, 1),
    max_value=datetime(2100, 1, 1),
    timezones=st.sampled_from(
        (UTC, timezone(timedelta(hours=8)), timezone(timedelta(hours=-5, minutes=-30)))
    ),
)


def st_aware_datetime() -> st.SearchStrategy[datetime]:
    """Aware datetimes in assorted fixed offsets (the models normalise them to UTC)."""
    return _aware_datetime


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


_opt_name = st.none() | _name
_opt_gpu_model = st.none() | _gpu_model
_opt_gpu_mem = st.none() | _gpu_mem
_uuid = st.uuids().map(str)
_mig_devices = st.dictionaries(st.sampled_from(MIG_PROFILES), _mig, max_size=2)
_request_gpus = st.sampled_from((0, 0, 1, 1, 2, 4, 8))
_card_share = st.integers(min_value=1, max_value=MILLI_PER_GPU)
_opt_cores_pct = st.none() | st.integers(0, 100)


@st.composite
def st_resource_request(draw: st.DrawFn) -> ResourceRequest:
    gpu_count = draw(_request_gpus)
    if gpu_count == 0:
        gpu_milli = 0
    elif gpu_count == 1:
        gpu_milli = draw(_card_share)
    else:
        gpu_milli = MILLI_PER_GPU
    has_gpu = gpu_count > 0
    return ResourceRequest(
        cpu_milli=draw(_cpu),
        memory_mib=draw(_mem),
        gpu_count=gpu_count,
        gpu_milli=gpu_milli,
        mig=draw(_mig_devices),
        gpu_memory_mib=draw(_opt_gpu_mem) if has_gpu else None,
        gpu_cores_pct=draw(_opt_cores_pct) if has_gpu else None,
    )


# Strategies are built once, here, not inside the composites: building one per draw (``st.none()
# | x``, ``sampled_from([...])``) validated it again every time, which cost a third of the fuzz
# tests' time.
_request = st_resource_request()
_pod_indices = st.lists(st.integers(0, 15), max_size=8, unique=True)
_pod_gpu_models = st.lists(_gpu_model, max_size=3)
_pod_phase = st.sampled_from(PodPhase)
_opt_memory_limit = st.none() | st.integers(1, 81_920)
_priority = st.integers(min_value=-(2**31), max_value=2**31 - 1)
_owner = st.none() | st.builds(OwnerRef, kind=st.sampled_from(["Job", "StatefulSet"]), name=_name)
_qos = st.none() | st.sampled_from(QosClass)
_gang = st.none() | st.builds(GangRef, name=_name, min_member=st.integers(1, 64))
_workload_kind = st.sampled_from(WorkloadKind)


@st.composite
def st_pod(draw: st.DrawFn, phase: PodPhase | None = None) -> Pod:
    node = draw(_opt_name)
    indices: tuple[int, ...] = ()
    if node is not None:
        indices = tuple(draw(_pod_indices))
    return Pod(
        namespace=draw(_name),
        name=draw(_name),
        uid=draw(_uuid),
        phase=phase or draw(_pod_phase),
        node=node,
        requests=draw(_request),
        gpu_models=tuple(draw(_pod_gpu_models)),
        gpu_indices=indices,
        gpu_memory_limit_mib=draw(_opt_memory_limit),
        priority=draw(_priority),
        queue=draw(_opt_name),
        tenant=draw(_opt_name),
        owner=draw(_owner),
        qos=draw(_qos),
        gang=draw(_gang),
        workload_kind=draw(_workload_kind),
        preemptible=draw(st.booleans()),
        created_at=draw(_aware_datetime),
    )


_taint = st.builds(
    Taint,
    key=_name,
    value=st.none() | _name,
    effect=st.sampled_from(["NoSchedule", "PreferNoSchedule", "NoExecute"]),
)
_node_gpus = st.sampled_from((0, 1, 2, 4, 8))
_replicas = st.integers(1, 16)
_opt_sharing = st.none() | st.sampled_from(list(SharingMode))
_mig_cards = st.integers(0, 8)
_node_labels = st.dictionaries(_name, st.text(max_size=10), max_size=3)
_taints = st.lists(_taint, max_size=2)


def st_taints() -> st.SearchStrategy[list[Taint]]:
    return _taints


@st.composite
def st_node(draw: st.DrawFn) -> Node:
    gpu_count = draw(_node_gpus)
    mig = draw(_mig_devices)
    if gpu_count > 0:
        model: str | None = draw(_gpu_model)
    elif mig:
        model = draw(_opt_gpu_model)
    else:
        model = None
    mig = {p: n for p, n in mig.items() if mig_profile_slices(p) <= card_slices(model)}
    return Node(
        name=draw(_name),
        cpu_milli=draw(_cpu),
        memory_mib=draw(_mem),
        gpu_model=model,
        gpu_count=gpu_count,
        gpu_memory_mib=draw(_opt_gpu_mem),
        gpu_replicas=draw(_replicas),
        gpu_sharing=draw(_opt_sharing),
        mig_devices=mig,
        mig_cards=draw(_mig_cards),
        labels=draw(_node_labels),
        taints=tuple(draw(_taints)),
        unschedulable=draw(st.booleans()),
        pool=draw(_opt_name),
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


_opt_nonneg_mib = st.none() | st.floats(
    0, GPU_MEMORY_MIB_MAX, allow_nan=False, allow_infinity=False
)
_card_index = st.integers(0, 15)
_opt_card_uuid = st.none() | st.uuids().map(lambda u: f"GPU-{u}")
_opt_card_model = st.none() | st.sampled_from(["NVIDIA H200", "Tesla T4"])
_opt_util_pct = st.none() | st.floats(0, 100)
_opt_engine = st.none() | st.floats(0, 1)
_opt_xid = st.none() | st.sampled_from([13, 31, 43, 45, 48, 63, 64, 74, 79, 94, 95])
_opt_mig_profile = st.none() | st.sampled_from(MIG_PROFILES)
_opt_mig_instance = st.none() | st.integers(0, 7)


@st.composite
def st_gpu_sample(draw: st.DrawFn) -> GpuSample:
    total = draw(_opt_nonneg_mib)
    used = draw(_opt_nonneg_mib if total is None else st.none() | st.floats(0, total))
    return GpuSample(
        node=draw(_name),
        gpu_index=draw(_card_index),
        uuid=draw(_opt_card_uuid),
        model=draw(_opt_card_model),
        memory_total_mib=total,
        memory_used_mib=used,
        memory_reserved_mib=draw(_opt_nonneg_mib),
        utilization_pct=draw(_opt_util_pct),
        engine_active=draw(_opt_engine),
        xid=draw(_opt_xid),
        mig_profile=draw(_opt_mig_profile),
        mig_instance=draw(_opt_mig_instance),
        pod=draw(_opt_name),
        namespace=draw(_opt_name),
        container=draw(_opt_name),
    )


def st_scheduler_event() -> st.SearchStrategy[SchedulerEvent]:
    return _scheduler_event


_change = st.sampled_from(["upsert", "delete"])
_amounts = st.dictionaries(
    st.sampled_from(["nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "nvidia.com/gpumem"]),
    st.floats(min_value=0, max_value=1e6, allow_nan=False, allow_infinity=False),
    max_size=3,
)


_queue_kind = st.sampled_from(QueueSourceKind)
_queue_uid = st.text(max_size=8)
_opt_min_member = st.none() | st.integers(1, 64)
_opt_queue_state = st.none() | st.sampled_from(["Pending", "Running", "Open", "Admitted"])
_opt_count = st.none() | st.integers(0, 1000)


@st.composite
def st_queue_object(draw: st.DrawFn) -> QueueObject:
    kind = draw(_queue_kind)
    cluster_scoped = kind in (QueueSourceKind.CLUSTER_QUEUE, QueueSourceKind.VOLCANO_QUEUE)
    return QueueObject(
        source_kind=kind,
        namespace=None if cluster_scoped else draw(_name),
        name=draw(_name),
        uid=draw(_queue_uid),
        parent=draw(_opt_name),
        cohort=draw(_opt_name),
        nominal=draw(_amounts),
        limit=draw(_amounts),
        used=draw(_amounts),
        requested=draw(_amounts),
        min_member=draw(_opt_min_member),
        state=draw(_opt_queue_state),
        pending=draw(_opt_count),
        admitted=draw(_opt_count),
    )


_payloads: dict[EventKind, st.SearchStrategy[PayloadModel]] = {
    EventKind.POD: st.builds(PodEvent, change=_change, pod=st_pod()),
    EventKind.NODE: st.builds(NodeEvent, change=_change, node=st_node()),
    EventKind.SCHEDULER: st.builds(SchedulingEvent, event=_scheduler_event),
    EventKind.GPU_SAMPLE: st.builds(GpuSampleEvent, sample=st_gpu_sample()),
    EventKind.QUEUE: st.builds(QueueEvent, change=_change, queue=st_queue_object()),
}
_any_payload = st.one_of(*_payloads.values())
_source = st.sampled_from(("kube", "dcgm", "nvml", "trace:openb"))
_opt_id = st.none() | st.text(min_size=1, max_size=40)


def st_payload(kind: EventKind | None = None) -> st.SearchStrategy[PayloadModel]:
    """A payload of `kind`, or of any kind when None."""
    return _any_payload if kind is None else _payloads[kind]


@st.composite
def st_envelope(draw: st.DrawFn, kind: EventKind | None = None) -> Envelope:
    """An envelope built with Envelope.wrap, sometimes with an explicit id."""
    return Envelope.wrap(
        draw(st_payload(kind)),
        event_time=draw(_aware_datetime),
        source=draw(_source),
        id=draw(_opt_id),
    )
