"""V1Node -> models.Node: schedulable capacity from allocatable, the card model and layout from
GPU Feature Discovery's labels.

Whole cards are allocatable ``nvidia.com/gpu`` (plus renamed ``nvidia.com/gpu.shared``) divided
by the time-slicing replicas, capped by the ``nvidia.com/gpu.count`` label: HAMi advertises
several virtual GPUs per card, and an unhealthy card leaves allocatable below the label.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from connectors.kube.gpu.hami import HAMI_REGISTER, HamiCards, hami_cards
from connectors.kube.gpu.resource_names import (
    GPU,
    GPU_SHARED,
    LABEL_COUNT,
    LABEL_MEMORY,
    LABEL_MIG_STRATEGY,
    LABEL_PRODUCT,
    LABEL_REPLICAS,
    gpu_model_of,
    mig_profile,
)
from connectors.kube.objects import MappingError, refused_fields, taints_of
from connectors.kube.quantity import QuantityError, ceil_int, parse_amount
from models import Node
from models.bounds import REPLICAS_MAX
from models.cards import SharingMode, card_slices, mig_profile_slices

__all__ = ["node_from_kube"]


def _int_label(labels: dict[str, str], key: str) -> int | None:
    raw = labels.get(key)
    if raw is None:
        return None
    try:
        return int(raw)
    except ValueError:
        raise MappingError(f"label {key}={raw!r} is not an integer") from None


def _amount(resources: dict[str, Any], name: str) -> int:
    """A device count (cards, replicas, MIG instances). The device plugin advertises whole
    devices; "500m" used to be truncated to 0 and the node's cards vanished without a word."""
    raw = resources.get(name)
    if raw is None:
        return 0
    try:
        amount = parse_amount(raw)
    except QuantityError as exc:
        raise MappingError(f"allocatable {name}: {exc}") from None
    if amount != amount.to_integral_value():
        raise MappingError(f"allocatable {name}={raw!r} is not a whole number of devices")
    return int(amount)


def _replicas(labels: dict[str, str], hami: HamiCards | None) -> int:
    if hami is not None:
        return hami.split
    replicas = _int_label(labels, LABEL_REPLICAS)
    if replicas is None:
        return 1
    if not 1 <= replicas <= REPLICAS_MAX:
        raise MappingError(f"label {LABEL_REPLICAS}={replicas} is outside 1..{REPLICAS_MAX}")
    return replicas


def _sharing(replicas: int, hami: HamiCards | None) -> SharingMode:
    if hami is not None:
        return SharingMode.HAMI
    return SharingMode.TIME_SLICED if replicas > 1 else SharingMode.EXCLUSIVE


@dataclass(frozen=True, slots=True)
class _Layout:
    cards: int
    """Whole cards."""
    replicas: int
    mig: dict[str, int]
    mig_cards: int
    card_memory: int | None
    single_profile: str | None


def _single_profile(labels: dict[str, str]) -> str | None:
    """The profile of a node in MIG's single strategy, where GFD names the instances as the
    product ("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb") and each ``nvidia.com/gpu`` is one."""
    if labels.get(LABEL_MIG_STRATEGY) != "single":
        return None
    _, sep, profile = labels.get(LABEL_PRODUCT, "").rpartition("-MIG-")
    return profile.lower() if sep and profile else None


def _layout(labels: dict[str, str], allocatable: dict[str, Any], hami: HamiCards | None) -> _Layout:
    replicas = _replicas(labels, hami)
    advertised = _amount(allocatable, GPU) + _amount(allocatable, GPU_SHARED)
    single = _single_profile(labels)
    if single is not None:
        # the labels' count and memory are the instances', not the cards'
        mig = {single: advertised} if advertised else {}
        return _Layout(0, 1, mig, 0, None, single)
    if 0 < advertised < replicas:
        # fewer replicas than one card has: the node would silently have no cards at all
        raise MappingError(
            f"allocatable {GPU}={advertised} is below one card's "
            f"{LABEL_REPLICAS}={replicas} replicas"
        )
    cards = advertised // replicas
    counted = _int_label(labels, LABEL_COUNT)
    if counted is not None:
        if counted < 0:
            raise MappingError(f"label {LABEL_COUNT}={counted} is negative")
        cards = min(cards, counted)
    mig = {
        profile: _amount(allocatable, name)
        for name in sorted(allocatable)
        if (profile := mig_profile(name)) is not None and _amount(allocatable, name) > 0
    }
    # GFD counts every card; those not advertised whole are the MIG ones
    mig_cards = max(0, counted - cards) if mig and counted is not None else 0
    card_memory = _int_label(labels, LABEL_MEMORY)
    if hami is not None and hami.memory_mib:
        card_memory = hami.memory_mib
    return _Layout(cards, replicas, mig, mig_cards, card_memory or None, None)


KUBELET_CONDITIONS = frozenset(
    {"Ready", "MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable"}
)
"""The kubelet's own conditions: it taints the node for these. Of the others, one named
``...Ready`` (the EKS node monitoring agent's ``AcceleratedHardwareReady``, ``KernelReady``) is a
problem when False; any other (Node Problem Detector's ``KernelDeadlock``, a GPU check's own) is
a problem when True."""
PROBLEM_TEXT_MAX = 200
"""A condition's reason and message kept, in characters: enough for NPD's one-line messages
("kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=..., GPU has fallen off the bus.")."""


def problems_of(conditions: Any) -> dict[str, str]:
    out: dict[str, str] = {}
    for c in conditions or []:
        if not c.type or c.type in KUBELET_CONDITIONS:
            continue
        bad = "False" if str(c.type).endswith("Ready") else "True"
        if c.status != bad:
            continue  # Unknown: the checker has not said; not taken as a problem
        text = ": ".join(x for x in (c.reason, c.message) if x) or bad
        out[str(c.type)] = text[:PROBLEM_TEXT_MAX]
    return dict(sorted(out.items()))


def _check_mig_fits(layout: _Layout, model: str | None) -> None:
    """Instances that need more compute slices than the node's MIG cards have (GFD's count
    less the whole cards) cannot all exist; laid out anyway, some would silently vanish."""
    if not layout.mig_cards or not layout.mig:
        return
    needed = sum(mig_profile_slices(p) * n for p, n in layout.mig.items())
    has = layout.mig_cards * card_slices(model)
    if needed > has:
        raise MappingError(
            f"allocatable MIG instances need {needed} compute slices; the node's "
            f"{layout.mig_cards} MIG cards ({LABEL_COUNT} less whole cards) have {has}"
        )


def node_from_kube(node: Any, *, pool_label: str | None, now: datetime) -> Node:
    """The node as gpufrag models it; raises MappingError naming what could not be read
    (most often a GPU product label that is not one of the known models)."""
    del now  # nodes carry no time of their own; kept for a uniform mapper signature
    meta, spec, status = node.metadata, node.spec, node.status
    if meta is None or not meta.name:
        raise MappingError("node without metadata.name")
    labels: dict[str, str] = dict(meta.labels or {})
    allocatable: dict[str, Any] = dict(
        (status.allocatable or status.capacity or {}) if status else {}
    )
    try:
        cpu_milli = ceil_int(parse_amount(allocatable.get("cpu", 0)) * 1000)
        memory_mib = int(parse_amount(allocatable.get("memory", 0)) / (1024 * 1024))
    except QuantityError as exc:
        raise MappingError(f"allocatable: {exc}") from None
    hami = hami_cards((meta.annotations or {}).get(HAMI_REGISTER))
    layout = _layout(labels, allocatable, hami)
    model: str | None = None
    if layout.cards > 0 or layout.mig:
        product = labels.get(LABEL_PRODUCT) or (hami.product if hami else None)
        if not product:
            raise MappingError(
                f"node has GPUs but no {LABEL_PRODUCT} label (is GPU Feature Discovery running?)"
            )
        model = gpu_model_of(product, memory_mib=layout.card_memory)
        if model is None:
            raise MappingError(f"label {LABEL_PRODUCT}={product!r} names no GPU model")
    try:
        out = Node(
            name=meta.name,
            cpu_milli=cpu_milli,
            memory_mib=memory_mib,
            gpu_model=model,
            gpu_count=layout.cards,
            gpu_shared_resource=_amount(allocatable, GPU_SHARED) > 0
            and _amount(allocatable, GPU) == 0,
            gpu_memory_mib=layout.card_memory if model is not None else None,
            gpu_replicas=layout.replicas,
            gpu_sharing=_sharing(layout.replicas, hami),
            mig_devices=layout.mig,
            mig_cards=layout.mig_cards,
            mig_device_profile=layout.single_profile,
            labels=labels,
            taints=taints_of(spec.taints if spec else None),
            unschedulable=bool(spec.unschedulable) if spec else False,
            problems=problems_of(status.conditions if status else None),
            pool=labels.get(pool_label) if pool_label else None,
        )
    except ValidationError as exc:
        raise refused_fields(exc) from None
    _check_mig_fits(layout, model)  # after the model has named a profile too big for a card
    return out
