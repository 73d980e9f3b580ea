"""``resource.k8s.io/v1`` JSON -> the DRA edge models (models/dra.py).

The objects arrive as the API server wrote them (dicts, camelCase): kubernetes-asyncio's
generated models would cost a deserialization for fields gpufrag never reads. What cannot be
read raises MappingError naming the field, and becomes a dead letter like any refused object.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from pydantic import ValidationError

from connectors.kube.objects import MappingError, get_path, refused_fields
from connectors.kube.quantity import QuantityError, ceil_int, parse_quantity
from models.dra import (
    AttributeValue,
    ClaimRequest,
    ClaimResult,
    DeviceClassSpec,
    DeviceKind,
    DeviceTaintRuleSpec,
    DraClaim,
    DraDevice,
    DraSlice,
    DraTaint,
    MatchAttribute,
)

__all__ = [
    "allocation_node",
    "claim_from_dict",
    "claim_names_of",
    "device_class_from_dict",
    "slice_from_dict",
    "taint_rule_from_dict",
    "template_from_dict",
]

_MIB = Decimal(1024 * 1024)


def _list(value: Any, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise MappingError(f"{where} is not a list")
    return value


def _dict(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise MappingError(f"{where} is not an object")
    return value


def _amount(value: Any, where: str) -> int:
    """A quantity as a whole number (counters, counts), rounded up."""
    try:
        return ceil_int(parse_quantity(value))
    except QuantityError as exc:
        raise MappingError(f"{where}: {exc}") from None


def _mib(value: Any, where: str) -> int:
    try:
        return ceil_int(parse_quantity(value) / _MIB)
    except QuantityError as exc:
        raise MappingError(f"{where}: {exc}") from None


def _attribute(value: Any, where: str) -> AttributeValue:
    raw = _dict(value, where)
    for kind in ("string", "version"):
        if isinstance(raw.get(kind), str):
            return str(raw[kind])
    if isinstance(raw.get("bool"), bool):
        return bool(raw["bool"])
    if isinstance(raw.get("int"), int) and not isinstance(raw.get("int"), bool):
        return int(raw["int"])
    raise MappingError(f"{where}: not a string, version, int or bool attribute")


def _taint(raw: Any, where: str) -> DraTaint:
    data = _dict(raw, where)
    return DraTaint(key=data.get("key"), value=data.get("value"), effect=data.get("effect"))


def _counters(raw: Any, where: str) -> dict[str, int]:
    return {
        str(name): _amount(get_path(c, "value"), f"{where}.{name}")
        for name, c in _dict(raw, where).items()
    }


def _device(raw: Any, *, driver: str, where: str) -> DraDevice:
    data = _dict(raw, where)
    attributes = {
        (name if "/" in name else f"{driver}/{name}"): _attribute(v, f"{where}.attributes.{name}")
        for name, v in _dict(data.get("attributes"), f"{where}.attributes").items()
    }
    kind_text = attributes.get(f"{driver}/type")
    kind = DeviceKind(kind_text) if kind_text in ("gpu", "mig") else DeviceKind.OTHER
    capacity = _dict(data.get("capacity"), f"{where}.capacity")
    memory = get_path(capacity, "memory", "value")
    uses = _list(data.get("consumesCounters"), f"{where}.consumesCounters")
    counter_set: str | None = None
    counters: dict[str, int] = {}
    if uses:
        first = _dict(uses[0], f"{where}.consumesCounters[0]")
        counter_set = first.get("counterSet")
        counters = _counters(first.get("counters"), f"{where}.consumesCounters[0].counters")
    return DraDevice(
        name=data.get("name"),
        kind=kind,
        attributes=attributes,
        # a GPU's memory only: another kind of device may hold far more than any card
        memory_mib=_mib(memory, f"{where}.capacity.memory")
        if memory is not None and kind is not DeviceKind.OTHER
        else None,
        shared=data.get("allowMultipleAllocations") is True,
        counter_set=counter_set,
        counters=counters,
        taints=tuple(
            _taint(t, f"{where}.taints[{i}]")
            for i, t in enumerate(_list(data.get("taints"), f"{where}.taints"))
        ),
    )


def slice_from_dict(raw: dict[str, Any]) -> DraSlice:
    spec = _dict(raw.get("spec"), "spec")
    driver = spec.get("driver")
    if not isinstance(driver, str) or not driver:
        raise MappingError("spec.driver is missing")
    pool = _dict(spec.get("pool"), "spec.pool")
    try:
        return DraSlice(
            name=get_path(raw, "metadata", "name"),
            driver=driver,
            pool=pool.get("name"),
            generation=pool.get("generation", 0),
            slice_count=pool.get("resourceSliceCount", 1),
            node=spec.get("nodeName") or None,
            devices=tuple(
                _device(d, driver=driver, where=f"spec.devices[{i}]")
                for i, d in enumerate(_list(spec.get("devices"), "spec.devices"))
            ),
            counter_sets={
                str(get_path(s, "name")): _counters(
                    get_path(s, "counters"), f"spec.sharedCounters[{i}].counters"
                )
                for i, s in enumerate(_list(spec.get("sharedCounters"), "spec.sharedCounters"))
            },
        )
    except ValidationError as exc:
        raise refused_fields(exc) from None


def _selectors(raw: Any, where: str) -> tuple[str, ...]:
    out = []
    for i, s in enumerate(_list(raw, where)):
        expression = get_path(s, "cel", "expression")
        if not isinstance(expression, str):
            raise MappingError(f"{where}[{i}] has no cel.expression")
        out.append(expression)
    return tuple(out)


def device_class_from_dict(raw: dict[str, Any]) -> DeviceClassSpec:
    spec = _dict(raw.get("spec"), "spec")
    try:
        return DeviceClassSpec(
            name=get_path(raw, "metadata", "name"),
            selectors=_selectors(spec.get("selectors"), "spec.selectors"),
            extended_resource_name=spec.get("extendedResourceName") or None,
        )
    except ValidationError as exc:
        raise refused_fields(exc) from None


def _request(raw: Any, where: str) -> ClaimRequest:
    data = _dict(raw, where)
    exact = data.get("exactly")
    body = _dict(exact, f"{where}.exactly") if exact is not None else data
    memory = get_path(body, "capacity", "requests", "memory")
    alternatives = tuple(
        _request(s, f"{where}.firstAvailable[{i}]")
        for i, s in enumerate(_list(data.get("firstAvailable"), f"{where}.firstAvailable"))
    )
    return ClaimRequest(
        name=data.get("name"),
        class_name=body.get("deviceClassName")
        or (alternatives[0].class_name if alternatives else ""),
        selectors=_selectors(body.get("selectors"), f"{where}.selectors"),
        all=body.get("allocationMode") == "All",
        admin_access=body.get("adminAccess") is True,
        count=body.get("count", 1) or 1,
        memory_mib=_mib(memory, f"{where}.capacity.requests.memory")
        if memory is not None
        else None,
        alternatives=alternatives,
    )


def _claim_spec(
    spec: dict[str, Any], where: str
) -> tuple[tuple[ClaimRequest, ...], tuple[MatchAttribute, ...]]:
    devices = _dict(spec.get("devices"), f"{where}.devices")
    requests = tuple(
        _request(r, f"{where}.devices.requests[{i}]")
        for i, r in enumerate(_list(devices.get("requests"), f"{where}.devices.requests"))
    )
    constraints = tuple(
        MatchAttribute(
            requests=tuple(get_path(c, "requests") or ()), attribute=get_path(c, "matchAttribute")
        )
        for c in _list(devices.get("constraints"), f"{where}.devices.constraints")
        if get_path(c, "matchAttribute")
    )
    return requests, constraints


def allocation_node(claim: Any) -> str | None:
    """The node a claim's allocation is bound to: the scheduler writes ``matchFields
    metadata.name In [node]``; any other selector (a network-attached device) names no one
    node, and an unallocated claim none."""
    selector = get_path(claim, "status", "allocation", "nodeSelector")
    for term in _list(get_path(selector, "nodeSelectorTerms"), "nodeSelector"):
        for field in _list(get_path(term, "matchFields"), "matchFields"):
            values = get_path(field, "values")
            if (
                get_path(field, "key") == "metadata.name"
                and get_path(field, "operator") == "In"
                and isinstance(values, list)
                and len(values) == 1
            ):
                return str(values[0])
    return None


def claim_from_dict(raw: dict[str, Any]) -> DraClaim:
    meta = _dict(raw.get("metadata"), "metadata")
    allocation = get_path(raw, "status", "allocation")
    try:
        results = tuple(
            ClaimResult(
                request=r.get("request"),
                driver=r.get("driver"),
                pool=r.get("pool"),
                device=r.get("device"),
                share_id=r.get("shareID") if isinstance(r.get("shareID"), str) else None,
                consumed_memory_mib=_mib(memory, f"status.allocation.devices.results[{i}]")
                if (memory := get_path(r, "consumedCapacity", "memory")) is not None
                else None,
                admin_access=r.get("adminAccess") is True,
            )
            for i, r in enumerate(
                _list(
                    get_path(allocation, "devices", "results"), "status.allocation.devices.results"
                )
            )
            if isinstance(r, dict)
        )
    except ValidationError as exc:
        raise refused_fields(exc, where="status.allocation.devices.results") from None
    return _claim(
        meta,
        raw.get("spec"),
        "spec",
        allocated=isinstance(allocation, dict),
        results=results,
        node=allocation_node(raw),
        reserved_for=tuple(
            str(get_path(r, "name"))
            for r in _list(get_path(raw, "status", "reservedFor"), "status.reservedFor")
            if get_path(r, "resource") == "pods" and get_path(r, "name")
        ),
    )


def template_from_dict(raw: dict[str, Any]) -> DraClaim:
    """A ResourceClaimTemplate as the unallocated claim it stamps out: what a pod that names it
    asks for before the claim controller has made its claim."""
    meta = _dict(raw.get("metadata"), "metadata")
    return _claim(meta, get_path(raw, "spec", "spec"), "spec.spec")


def _claim(meta: dict[str, Any], spec: Any, where: str, **status: Any) -> DraClaim:
    try:
        requests, constraints = _claim_spec(_dict(spec, where), where)
        return DraClaim(
            namespace=meta.get("namespace") or "default",
            name=meta.get("name"),
            uid=meta.get("uid") or "",
            requests=requests,
            constraints=constraints,
            **status,
        )
    except ValidationError as exc:
        raise refused_fields(exc) from None


def taint_rule_from_dict(raw: dict[str, Any]) -> DeviceTaintRuleSpec:
    spec = _dict(raw.get("spec"), "spec")
    selector = _dict(spec.get("deviceSelector"), "spec.deviceSelector")
    try:
        return DeviceTaintRuleSpec(
            name=get_path(raw, "metadata", "name"),
            driver=selector.get("driver"),
            pool=selector.get("pool"),
            device=selector.get("device"),
            taint=_taint(spec.get("taint"), "spec.taint"),
        )
    except ValidationError as exc:
        raise refused_fields(exc) from None


def claim_names_of(pod: dict[str, Any] | Any) -> tuple[tuple[str, str], ...]:
    """(kind, name) of each claim a pod uses: ``claim`` (a ResourceClaim by name) or
    ``template`` (a ResourceClaimTemplate whose claim is not made yet). A template's claim
    goes by the name the pod's status gives once the controller has made it, and the
    scheduler's claim for extended resources by the one in ``extendedResourceClaimStatus``."""
    if isinstance(pod, dict):
        spec_claims = get_path(pod, "spec", "resourceClaims") or []
        made_raw = get_path(pod, "status", "resourceClaimStatuses") or []
        made = {get_path(s, "name"): get_path(s, "resourceClaimName") for s in made_raw}
        extended = get_path(pod, "status", "extendedResourceClaimStatus", "resourceClaimName")
        entries = [
            (
                get_path(c, "name"),
                get_path(c, "resourceClaimName"),
                get_path(c, "resourceClaimTemplateName"),
            )
            for c in spec_claims
        ]
    else:
        spec, status = pod.spec, pod.status
        entries = [
            (c.name, c.resource_claim_name, c.resource_claim_template_name)
            for c in ((spec.resource_claims or []) if spec else [])
        ]
        statuses = (status.resource_claim_statuses or []) if status else []
        made = {s.name: s.resource_claim_name for s in statuses}
        ext = status.extended_resource_claim_status if status else None
        extended = ext.resource_claim_name if ext else None
    out: list[tuple[str, str]] = []
    for name, claim, template in entries:
        if claim:
            out.append(("claim", str(claim)))
        elif made.get(name):
            out.append(("claim", str(made[name])))
        elif name in made:
            continue  # the status says no claim was needed for it
        elif template:
            out.append(("template", str(template)))
    if extended:
        out.append(("extended", str(extended)))
    return tuple(out)
