"""V1Pod (kubernetes-asyncio's model) -> models.Pod, and the OOM kills a pod status reports.

Requests follow the scheduler's own arithmetic: containers summed, init containers as a
maximum, restartable init containers (sidecars) added to both, plus the pod overhead. GPU shape:
``nvidia.com/gpu`` (and renamed time-slicing replicas ``nvidia.com/gpu.shared``) are cards;
``nvidia.com/mig-<profile>`` are MIG slices; HAMi's ``nvidia.com/gpucores`` and
``nvidia.com/gpumem`` limit each card, and a single HAMi card with a core share below 100 %
is a shared card of that many milli-GPUs, the unit the fragmentation measure uses.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from pydantic import ValidationError

from connectors.kube.gpu.memory_limits import mps_limit_mib
from connectors.kube.gpu.oom_messages import gpu_oom_reason
from connectors.kube.gpu.resource_names import (
    GPU,
    GPU_CORES,
    GPU_INDICES,
    GPU_MEMORY,
    GPU_MEMORY_PCT,
    GPU_SHARED,
    LABEL_PRODUCT,
    gpu_model_of,
    mig_profile,
)
from connectors.kube.objects import MappingError, aware, refused_fields, tolerations_of
from connectors.kube.quantity import QuantityError, ceil_int, parse_amount
from models import (
    MILLI_PER_GPU,
    GangRef,
    OwnerRef,
    Pod,
    PodPhase,
    QosClass,
    ResourceRequest,
    WorkloadKind,
)

__all__ = [
    "GangLookup",
    "OomKill",
    "oom_kills",
    "pod_from_kube",
    "pod_requests",
    "resource_request_of",
]

GangLookup = Callable[[str, str], int | None]
"""(namespace, pod group name) -> the PodGroup's minMember, when the PodGroup is known."""

Vector = dict[str, Decimal]

KUEUE_QUEUE = "kueue.x-k8s.io/queue-name"
KUEUE_GROUP = "kueue.x-k8s.io/pod-group-name"
KUEUE_GROUP_COUNT = "kueue.x-k8s.io/pod-group-total-count"
VOLCANO_GROUPS = ("scheduling.k8s.io/group-name", "scheduling.volcano.sh/group-name")
VOLCANO_QUEUES = ("scheduling.volcano.sh/queue-name", "volcano.sh/queue-name")
VOLCANO_PREEMPTABLE = "volcano.sh/preemptable"

_PER_CARD = (GPU_MEMORY, GPU_MEMORY_PCT, GPU_CORES)
_OWNER_KINDS = {
    "PyTorchJob": WorkloadKind.TRAINING,
    "TFJob": WorkloadKind.TRAINING,
    "MPIJob": WorkloadKind.TRAINING,
    "XGBoostJob": WorkloadKind.TRAINING,
    "PaddleJob": WorkloadKind.TRAINING,
    "JAXJob": WorkloadKind.TRAINING,
    "TrainJob": WorkloadKind.TRAINING,
    "Notebook": WorkloadKind.NOTEBOOK,
    "Job": WorkloadKind.BATCH,
}


def _container_vector(container: Any) -> Vector:
    resources = getattr(container, "resources", None)
    if resources is None:
        return {}
    requests = resources.requests or {}
    limits = resources.limits or {}
    out: Vector = {}
    for name in sorted(set(requests) | set(limits)):
        # An extended resource may be given as a limit only; the API server then requests
        # the same amount, and so does the scheduler.
        raw = requests[name] if name in requests else limits[name]
        try:
            out[name] = parse_amount(raw)
        except QuantityError as exc:
            raise MappingError(f"container {container.name}: {name}: {exc}") from None
    return out


def _add(a: Vector, b: Vector) -> Vector:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, Decimal(0)) + v
    return out


def _max(a: Vector, b: Vector) -> Vector:
    out = dict(a)
    for k, v in b.items():
        out[k] = max(out.get(k, v), v)
    return out


def pod_requests(spec: Any) -> Vector:
    """The pod's effective request per resource, as kube-scheduler computes it."""
    app: Vector = {}
    for c in spec.containers or []:
        app = _add(app, _container_vector(c))
    sidecars: Vector = {}
    init_peak: Vector = {}
    for c in spec.init_containers or []:
        vec = _container_vector(c)
        if getattr(c, "restart_policy", None) == "Always":
            sidecars = _add(sidecars, vec)
            running = sidecars
        else:
            running = _add(sidecars, vec)
        init_peak = _max(init_peak, running)
    total = _max(_add(app, sidecars), init_peak)
    overhead: Vector = {}
    for name, raw in (spec.overhead or {}).items():
        try:
            overhead[name] = parse_amount(raw)
        except QuantityError as exc:
            raise MappingError(f"overhead {name}: {exc}") from None
    return _add(total, overhead)


def _per_card(spec: Any) -> Vector:
    # HAMi's memory and core limits are per card, not additive: the pod's value is the
    # largest any of its containers asks for.
    out: Vector = {}
    for c in [*(spec.init_containers or []), *(spec.containers or [])]:
        vec = _container_vector(c)
        out = _max(out, {k: v for k, v in vec.items() if k in _PER_CARD})
    return out


def resource_request_of(spec: Any) -> ResourceRequest:
    """The pod spec's demand as a ResourceRequest."""
    total = pod_requests(spec)
    per_card = _per_card(spec)
    zero = Decimal(0)
    gpus = ceil_int(total.get(GPU, zero) + total.get(GPU_SHARED, zero))
    cores = per_card.get(GPU_CORES)
    memory = per_card.get(GPU_MEMORY)
    share = per_card.get(GPU_MEMORY_PCT)
    gpu_milli = 0
    cores_pct: int | None = None
    memory_mib: int | None = None
    memory_pct: int | None = None
    if gpus > 0:
        gpu_milli = MILLI_PER_GPU
        if cores is not None:
            cores_pct = ceil_int(cores)
            if gpus == 1 and 0 < cores_pct < 100:
                gpu_milli = cores_pct * MILLI_PER_GPU // 100
        if memory is not None and memory > 0:
            memory_mib = ceil_int(memory)
        elif share is not None and share > 0:
            memory_pct = ceil_int(share)
    mig = {
        profile: ceil_int(amount)
        for name, amount in sorted(total.items())
        if (profile := mig_profile(name)) is not None and amount > 0
    }
    try:
        return ResourceRequest(
            cpu_milli=ceil_int(total.get("cpu", zero) * 1000),
            memory_mib=ceil_int(total.get("memory", zero) / (1024 * 1024)),
            gpu_count=gpus,
            gpu_milli=gpu_milli,
            mig=mig,
            gpu_memory_mib=memory_mib,
            gpu_memory_pct=memory_pct,
            gpu_cores_pct=cores_pct,
            gpu_shared_resource=total.get(GPU_SHARED, zero) > 0 and total.get(GPU, zero) == 0,
        )
    except ValidationError as exc:
        raise refused_fields(exc, where="requests") from None


def _first(mapping: dict[str, str], keys: Iterable[str]) -> str | None:
    for key in keys:
        value = mapping.get(key)
        if value:
            return value
    return None


def _gang(
    namespace: str, labels: dict[str, str], notes: dict[str, str], gangs: GangLookup
) -> GangRef | None:
    kueue = labels.get(KUEUE_GROUP)
    if kueue:
        raw = notes.get(KUEUE_GROUP_COUNT, "1")
        try:
            total = int(raw)
        except ValueError:
            raise MappingError(f"annotation {KUEUE_GROUP_COUNT}={raw!r} is not a count") from None
        # A Kueue pod group is admitted as a whole: every one of its pods is needed.
        if total < 1:
            raise MappingError(f"annotation {KUEUE_GROUP_COUNT}={raw!r} is below 1")
        return GangRef(name=kueue, min_member=total)
    volcano = _first(notes, VOLCANO_GROUPS) or _first(labels, VOLCANO_GROUPS)
    if volcano:
        # Until the PodGroup is seen, a group of one: Volcano's own default for plain pods.
        return GangRef(name=volcano, min_member=max(1, gangs(namespace, volcano) or 1))
    return None


def _owner(meta: Any) -> OwnerRef | None:
    refs = list(meta.owner_references or [])
    chosen = next((r for r in refs if r.controller), refs[0] if refs else None)
    if chosen is None or not chosen.kind or not chosen.name:
        return None
    return OwnerRef(kind=chosen.kind, name=chosen.name)


def _wanted_products(spec: Any) -> list[str]:
    out: list[str] = []
    selector = spec.node_selector or {}
    if LABEL_PRODUCT in selector:
        out.append(selector[LABEL_PRODUCT])
    affinity = spec.affinity.node_affinity if spec.affinity else None
    required = affinity.required_during_scheduling_ignored_during_execution if affinity else None
    for term in (required.node_selector_terms or []) if required else []:
        for expr in term.match_expressions or []:
            if expr.key == LABEL_PRODUCT and expr.operator == "In":
                out.extend(expr.values or [])
    return out


def _gpu_models(spec: Any) -> tuple[str, ...]:
    models = {m for p in _wanted_products(spec) if (m := gpu_model_of(p)) is not None}
    return tuple(sorted(models))


def _phase(raw: str | None) -> PodPhase:
    if raw is None:
        return PodPhase.PENDING
    try:
        return PodPhase(raw)
    except ValueError:
        return PodPhase.UNKNOWN


def _qos(raw: str | None) -> QosClass | None:
    try:
        return QosClass(raw) if raw else None
    except ValueError:
        return None


def _indices(notes: dict[str, str], requests: ResourceRequest) -> tuple[int, ...]:
    """The cards gpufrag's extender bound the pod to, from its annotation (kept so the
    view charges the cards the extender chose, not the device plugins' usual order)."""
    raw = notes.get(GPU_INDICES)
    if raw is None:
        return ()
    try:
        out = tuple(int(part) for part in raw.split(","))
    except ValueError:
        raise MappingError(f"annotation {GPU_INDICES}={raw[:40]!r} is not card indices") from None
    if len(out) != requests.gpu_count or any(i < 0 for i in out) or len(set(out)) != len(out):
        raise MappingError(
            f"annotation {GPU_INDICES}={raw[:40]!r} does not name {requests.gpu_count} "
            "distinct cards"
        )
    return out


def pod_from_kube(pod: Any, *, gangs: GangLookup, now: datetime) -> Pod:
    """The pod as gpufrag models it; raises MappingError naming what could not be read."""
    meta, spec, status = pod.metadata, pod.spec, pod.status
    if meta is None or spec is None or not meta.name:
        raise MappingError("pod without metadata.name or spec")
    namespace = meta.namespace or "default"
    labels: dict[str, str] = dict(meta.labels or {})
    notes: dict[str, str] = dict(meta.annotations or {})
    owner = _owner(meta)
    preemptible = (notes.get(VOLCANO_PREEMPTABLE) or labels.get(VOLCANO_PREEMPTABLE)) == "true"
    requests = resource_request_of(spec)
    try:
        return Pod(
            namespace=namespace,
            name=meta.name,
            uid=meta.uid or "",
            phase=_phase(status.phase if status else None),
            node=spec.node_name or None,
            requests=requests,
            gpu_indices=_indices(notes, requests) if spec.node_name else (),
            gpu_memory_limit_mib=requests.gpu_memory_mib or mps_limit_mib(spec),
            gpu_models=_gpu_models(spec),
            priority=spec.priority or 0,
            queue=labels.get(KUEUE_QUEUE)
            or _first(notes, VOLCANO_QUEUES)
            or _first(labels, VOLCANO_QUEUES),
            owner=owner,
            qos=_qos(status.qos_class if status else None),
            gang=_gang(namespace, labels, notes, gangs),
            tolerations=tolerations_of(spec.tolerations),
            workload_kind=_OWNER_KINDS.get(owner.kind, WorkloadKind.UNKNOWN)
            if owner
            else WorkloadKind.UNKNOWN,
            preemptible=preemptible,
            labels=labels,
            created_at=aware(meta.creation_timestamp) or now,
        )
    except ValidationError as exc:
        raise refused_fields(exc) from None


@dataclass(frozen=True, slots=True)
class OomKill:
    """One OOM kill of one container run, as the pod status reports it."""

    container: str
    container_id: str | None
    finished_at: datetime | None
    exit_code: int | None
    message: str | None
    reason: str = "OOMKilled"
    """``OOMKilled`` (the kernel's), or ``CudaOOM`` (a GPU allocation failed)."""

    @property
    def identity(self) -> str:
        # The same kill shows first in `state` and, after the restart, in `lastState`: the
        # container id and finish time are what stay the same between the two.
        when = self.finished_at.isoformat() if self.finished_at else ""
        return f"{self.container}|{self.container_id or ''}|{when}"


def _statuses(status: Any) -> Iterator[Any]:
    for group in (
        status.init_container_statuses,
        status.container_statuses,
        status.ephemeral_container_statuses,
    ):
        yield from group or []


def oom_kills(pod: Any) -> list[OomKill]:
    """Each distinct container run the status says was OOMKilled, or whose termination
    message is a GPU out-of-memory exit (current or last state)."""
    status = pod.status
    if status is None:
        return []
    seen: dict[str, OomKill] = {}
    for cs in _statuses(status):
        for state in (cs.state, cs.last_state):
            term = state.terminated if state is not None else None
            if term is None:
                continue
            reason = "OOMKilled" if term.reason == "OOMKilled" else gpu_oom_reason(term.message)
            if reason is None:
                continue
            kill = OomKill(
                container=cs.name,
                container_id=term.container_id,
                finished_at=aware(term.finished_at),
                exit_code=term.exit_code,
                message=term.message,
                reason=reason,
            )
            seen.setdefault(kill.identity, kill)
    return list(seen.values())
