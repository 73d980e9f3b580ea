"""Quota-bearing objects -> models.QueueObject: namespace ResourceQuotas (kubernetes-asyncio
models) and Kueue / Volcano custom resources (plain dicts: kubernetes-asyncio has no models
for them). Only GPU-related amounts are kept."""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal
from typing import Any

from pydantic import ValidationError

from connectors.kube.gpu.resource_names import is_gpu_resource
from connectors.kube.objects import MappingError, get_path, refused_fields
from connectors.kube.quantity import QuantityError, parse_amount
from models import QueueObject, QueueSourceKind

__all__ = [
    "cluster_queue_from_dict",
    "local_queue_from_dict",
    "pod_group_from_dict",
    "quota_from_kube",
    "volcano_queue_from_dict",
    "workload_from_dict",
]

Amounts = dict[str, float]


def _gpu_amounts(resources: Any, *, strip_requests: bool = False) -> dict[str, Decimal]:
    out: dict[str, Decimal] = {}
    for name, raw in (resources or {}).items():
        resource = str(name)
        if strip_requests:
            if resource.startswith("limits."):
                continue  # extended resources are quota'd by requests only
            resource = resource.removeprefix("requests.")
        if not is_gpu_resource(resource):
            continue
        try:
            out[resource] = out.get(resource, Decimal(0)) + parse_amount(raw)
        except QuantityError as exc:
            raise MappingError(f"{name}: {exc}") from None
    return out


def _floats(amounts: dict[str, Decimal]) -> Amounts:
    return {k: float(v) for k, v in sorted(amounts.items())}


def _sum(parts: Iterable[dict[str, Decimal]]) -> dict[str, Decimal]:
    out: dict[str, Decimal] = {}
    for part in parts:
        for k, v in part.items():
            out[k] = out.get(k, Decimal(0)) + v
    return out


def _count(value: Any) -> int | None:
    # A negative count goes on to the model, which refuses it: it is wrong, not unknown.
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


def _build(**fields: Any) -> QueueObject:
    try:
        return QueueObject(**fields)
    except ValidationError as exc:
        raise refused_fields(exc) from None


def _meta(obj: dict[str, Any]) -> tuple[str | None, str, str]:
    meta = obj.get("metadata") or {}
    name = meta.get("name")
    if not name:
        raise MappingError("object without metadata.name")
    return meta.get("namespace"), str(name), str(meta.get("uid") or "")


def _condition(obj: dict[str, Any], kind: str) -> bool:
    for cond in get_path(obj, "status", "conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == kind:
            return cond.get("status") == "True"
    return False


def quota_from_kube(quota: Any) -> QueueObject | None:
    """A namespace ResourceQuota, or None when it limits no GPU resource (most quotas)."""
    meta, spec, status = quota.metadata, quota.spec, quota.status
    hard_raw = (status.hard if status and status.hard else None) or (spec.hard if spec else None)
    hard = _floats(_gpu_amounts(hard_raw, strip_requests=True))
    if not hard:
        return None
    used = _floats(_gpu_amounts(status.used if status else None, strip_requests=True))
    return _build(
        source_kind=QueueSourceKind.RESOURCE_QUOTA,
        namespace=meta.namespace or "default",
        name=meta.name,
        uid=meta.uid or "",
        nominal=hard,
        limit=hard,
        used=used,
    )


def _flavor_usage(entries: Any) -> dict[str, Decimal]:
    parts = []
    for flavor in entries or []:
        for res in (flavor or {}).get("resources") or []:
            name, total = res.get("name"), res.get("total")
            if name is not None and total is not None:
                parts.append(_gpu_amounts({name: total}))
    return _sum(parts)


def cluster_queue_from_dict(obj: dict[str, Any]) -> QueueObject:
    """A Kueue ClusterQueue: nominal quota and borrowing limit summed over flavors."""
    _, name, uid = _meta(obj)
    nominal: list[dict[str, Decimal]] = []
    ceiling: list[dict[str, Decimal]] = []
    unbounded: set[str] = set()
    for group in get_path(obj, "spec", "resourceGroups") or []:
        for flavor in (group or {}).get("flavors") or []:
            for res in (flavor or {}).get("resources") or []:
                res_name = res.get("name")
                if res_name is None:
                    continue
                quota = _gpu_amounts({res_name: res.get("nominalQuota", 0)})
                nominal.append(quota)
                if res.get("borrowingLimit") is None:
                    unbounded.update(quota)
                else:
                    ceiling.append(_sum([quota, _gpu_amounts({res_name: res["borrowingLimit"]})]))
    cohort = get_path(obj, "spec", "cohort") or get_path(obj, "spec", "cohortName")
    if cohort:
        # Borrowing from the cohort is bounded only where every flavor sets a borrowingLimit.
        limit = {k: v for k, v in _sum(ceiling).items() if k not in unbounded}
    else:
        limit = _sum(nominal)  # no cohort, nothing to borrow: the nominal quota is the ceiling
    return _build(
        source_kind=QueueSourceKind.CLUSTER_QUEUE,
        name=name,
        uid=uid,
        cohort=cohort or None,
        nominal=_floats(_sum(nominal)),
        limit=_floats(limit),
        used=_floats(_flavor_usage(get_path(obj, "status", "flavorsUsage"))),
        state="Active" if _condition(obj, "Active") else "Inactive",
        pending=_count(get_path(obj, "status", "pendingWorkloads")),
        admitted=_count(get_path(obj, "status", "admittedWorkloads")),
    )


def local_queue_from_dict(obj: dict[str, Any]) -> QueueObject:
    """A Kueue LocalQueue: a namespace's door into a ClusterQueue."""
    namespace, name, uid = _meta(obj)
    usage = get_path(obj, "status", "flavorUsage") or get_path(obj, "status", "flavorsUsage")
    return _build(
        source_kind=QueueSourceKind.LOCAL_QUEUE,
        namespace=namespace or "default",
        name=name,
        uid=uid,
        parent=get_path(obj, "spec", "clusterQueue"),
        used=_floats(_flavor_usage(usage)),
        pending=_count(get_path(obj, "status", "pendingWorkloads")),
        admitted=_count(get_path(obj, "status", "admittedWorkloads")),
    )


def _template_demand(template: Any) -> dict[str, Decimal]:
    containers = get_path(template, "spec", "containers") or []
    inits = get_path(template, "spec", "initContainers") or []

    def one(c: Any) -> dict[str, Decimal]:
        requests = get_path(c, "resources", "requests") or {}
        limits = get_path(c, "resources", "limits") or {}
        return _gpu_amounts({**limits, **requests})

    app = _sum(one(c) for c in containers)
    for c in inits:
        for k, v in one(c).items():
            app[k] = max(app.get(k, Decimal(0)), v)
    return app


def workload_from_dict(obj: dict[str, Any]) -> QueueObject:
    """A Kueue Workload: the GPU demand of all its pod sets, and where it queues."""
    namespace, name, uid = _meta(obj)
    parts = []
    for pod_set in get_path(obj, "spec", "podSets") or []:
        count = Decimal((pod_set or {}).get("count") or 0)
        per_pod = _template_demand((pod_set or {}).get("template"))
        parts.append({k: v * count for k, v in per_pod.items()})
    if _condition(obj, "Finished"):
        state = "Finished"
    elif _condition(obj, "Admitted"):
        state = "Admitted"
    elif _condition(obj, "QuotaReserved"):
        state = "QuotaReserved"
    else:
        state = "Pending"
    return _build(
        source_kind=QueueSourceKind.WORKLOAD,
        namespace=namespace or "default",
        name=name,
        uid=uid,
        parent=get_path(obj, "spec", "queueName"),
        requested=_floats(_sum(parts)),
        state=state,
    )


def pod_group_from_dict(obj: dict[str, Any]) -> QueueObject:
    """A Volcano PodGroup: the gang size and the resources it needs before any pod starts."""
    namespace, name, uid = _meta(obj)
    raw_min = get_path(obj, "spec", "minMember")
    min_member = raw_min if isinstance(raw_min, int) and raw_min >= 1 else 1
    return _build(
        source_kind=QueueSourceKind.POD_GROUP,
        namespace=namespace or "default",
        name=name,
        uid=uid,
        parent=get_path(obj, "spec", "queue"),
        requested=_floats(_gpu_amounts(get_path(obj, "spec", "minResources"))),
        min_member=min_member,
        state=get_path(obj, "status", "phase"),
    )


def volcano_queue_from_dict(obj: dict[str, Any]) -> QueueObject:
    """A Volcano Queue: deserved share, capability ceiling and what is allocated now."""
    _, name, uid = _meta(obj)
    return _build(
        source_kind=QueueSourceKind.VOLCANO_QUEUE,
        name=name,
        uid=uid,
        parent=get_path(obj, "spec", "parent"),
        nominal=_floats(_gpu_amounts(get_path(obj, "spec", "deserved"))),
        limit=_floats(_gpu_amounts(get_path(obj, "spec", "capability"))),
        used=_floats(_gpu_amounts(get_path(obj, "status", "allocated"))),
        state=get_path(obj, "status", "state"),
        pending=_count(get_path(obj, "status", "pending")),
        admitted=_count(get_path(obj, "status", "running")),
    )
