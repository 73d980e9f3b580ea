"""DRA's view laid over the node and pod models: one capacity model for both worlds.

A node whose GPUs are DRA devices gets them as its cards (``node_with_dra``); a pod that uses
ResourceClaims gets what they hold, or ask for, as its GPU request (``pod_with_dra``). From
there on nothing downstream knows DRA was involved: the profiles, the FGD measure and the
explanations read the same fields they read for the device plugin's nodes and pods.

A node that advertises device-plugin GPUs keeps them and its DRA GPUs are left out: one node
in both worlds at once is not a layout either the scheduler or gpufrag can count.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from pydantic import ValidationError

from connectors.kube.dra.cel import CelUnsupported, Subject, compile_selector
from connectors.kube.dra.device_book import DraBook, NodeDevice
from connectors.kube.dra.device_cards import DraCard, by_device, models_of
from connectors.kube.gpu.resource_names import gpu_model_of
from connectors.kube.objects import refused_fields
from models import MILLI_PER_GPU, Node, Pod
from models.bounds import REPLICAS_MAX
from models.cards import SharingMode
from models.dra import ClaimRequest, DeviceKind, DraClaim

__all__ = ["ClaimUse", "DraNeed", "need_of", "node_with_dra", "pod_with_dra"]

ClaimUse = tuple[str, str]
"""(kind, name) from ``decode.claim_names_of``: ``claim``, ``template`` or ``extended``."""
CardsOf = Callable[[str], list[DraCard]]


def node_with_dra(node: Node, cards: list[DraCard]) -> Node:
    """The node with its DRA GPUs as its cards (unchanged when it has none, or has
    device-plugin GPUs)."""
    if not cards or node.gpu_count or node.mig_devices:
        return node
    models = models_of(cards)
    model = node.gpu_model or (models.most_common(1)[0][0] if models else _driver_of(cards))
    whole = [c for c in cards if c.mode != "mig"]
    shared = any(c.mode == "shared" for c in whole)
    instances: Counter[str] = Counter()
    for card in cards:
        if card.mode == "mig":
            instances.update(card.mig_used)
            instances.update(card.mig_free)
    memory = max((c.memory_mib or 0 for c in cards), default=0)
    try:
        return Node.model_validate(
            {
                **node.model_dump(),
                "gpu_model": model,
                "gpu_count": len(whole),
                "gpu_memory_mib": memory or None,
                # a shared DRA device limits claims by capacity, not by count
                "gpu_replicas": REPLICAS_MAX if shared else 1,
                "gpu_sharing": SharingMode.HAMI if shared else SharingMode.EXCLUSIVE,
                "mig_devices": dict(instances),
                "mig_cards": len(cards) - len(whole),
                "gpu_dra": True,
                "card_taints": {c.position: c.taint for c in cards if c.taint is not None},
            }
        )
    except ValidationError as exc:
        raise refused_fields(exc, where="DRA devices") from None


def _driver_of(cards: list[DraCard]) -> str:
    """The model of GPUs that name none (no ``productName``, no product label): their driver's
    name, so they are counted, and apart from every named model."""
    keys = [k for c in cards for k in ([c.full] if c.full else list(c.partitions))]
    return keys[0][0]


@dataclass(slots=True)
class DraNeed:
    """What a pod's claims hold or ask for, in the units of a ResourceRequest."""

    cards: int = 0
    memory_mib: int | None = None
    """Memory per card on shared devices."""
    mig: Counter[str] = field(default_factory=Counter)
    indices: list[int] = field(default_factory=list)
    models: set[str] = field(default_factory=set)
    unmatched: list[str] = field(default_factory=list)
    """Requests no device of the cluster matches ("claim/request")."""
    unreadable: list[str] = field(default_factory=list)
    """Selectors outside the CEL subset gpufrag reads."""


def _matching(book: DraBook, request: ClaimRequest, need: DraNeed) -> tuple[list[NodeDevice], bool]:
    """The GPUs (and MIG shapes) the request's class and selectors match, and whether they
    match any other device (a NIC's class asks for no GPU)."""
    dclass = book.classes.get(request.class_name)
    expressions = (*(dclass.selectors if dclass else ()), *request.selectors)
    key = (request.class_name, *expressions)
    found = book.matched.get(key)
    if found is None:
        found = book.matched[key] = _match(book, expressions)
    devices, others, unreadable = found
    if unreadable is not None:
        need.unreadable.append(f"{request.class_name}: {unreadable}")
    return devices, others


def _match(
    book: DraBook, expressions: tuple[str, ...]
) -> tuple[list[NodeDevice], bool, str | None]:
    out, others = [], False
    for d in book.all_devices():
        subject = Subject(driver=d.driver, device=d.device)
        try:
            if all(compile_selector(e)(subject) for e in expressions):
                if d.device.kind is DeviceKind.OTHER:
                    others = True
                else:
                    out.append(d)
        except CelUnsupported as exc:
            gpus = [x for x in book.all_devices() if x.device.kind is not DeviceKind.OTHER]
            return gpus, False, str(exc)
    return out, others, None


def _most_on_one_node(book: DraBook, matched: list[NodeDevice]) -> int:
    """``allocationMode: All`` takes every matching device of one node: as cards, the full
    GPUs it matches, or its MIG shapes where it matches no full GPU."""
    gpus = [d for d in matched if d.device.kind is DeviceKind.GPU] or matched
    per_node = Counter(book.node_of(d.key) for d in gpus)
    return max(per_node.values())


def _ask(book: DraBook, claim: DraClaim, need: DraNeed) -> None:
    for request in claim.requests:
        chosen, others = request, False
        matched: list[NodeDevice] = []
        for option in request.alternatives or (request,):
            matched, others = _matching(book, option, need)
            chosen = option
            if matched:
                break
        if chosen.admin_access or (not matched and others):
            continue  # monitoring access takes nothing; another kind of device is no GPU
        if not matched:
            need.unmatched.append(f"{claim.name}/{request.name}")
            need.cards += chosen.count
            continue
        need.models.update(
            m
            for d in matched
            if isinstance(p := d.device.attribute(d.driver, "productName"), str)
            if (m := gpu_model_of(p)) is not None
        )
        profiles = sorted(
            {
                p
                for d in matched
                if d.device.kind is DeviceKind.MIG
                and isinstance(p := d.device.attribute(d.driver, "profile"), str)
            }
        )
        count = _most_on_one_node(book, matched) if chosen.all else chosen.count
        if profiles and not any(d.device.kind is DeviceKind.GPU for d in matched):
            need.mig[profiles[0]] += count
        elif chosen.memory_mib is not None:
            need.cards += count
            need.memory_mib = max(need.memory_mib or 0, chosen.memory_mib)
        else:
            need.cards += count


def _held(claim: DraClaim, cards: list[DraCard], need: DraNeed) -> None:
    devices = by_device(cards)
    for r in claim.results:
        found = devices.get((r.driver, r.pool, r.device))
        if found is None or r.admin_access:
            continue  # not a GPU of this node (another driver's device)
        card, profile = found
        if card.model is not None:
            need.models.add(card.model)
        if profile is not None:
            need.mig[profile] += 1
            continue
        need.cards += 1
        need.indices.append(card.position)
        if card.mode == "shared" and r.consumed_memory_mib is not None:
            need.memory_mib = max(need.memory_mib or 0, r.consumed_memory_mib)


def need_of(pod: Pod, uses: tuple[ClaimUse, ...], book: DraBook, cards_of: CardsOf) -> DraNeed:
    need = DraNeed()
    for kind, name in uses:
        key = f"{pod.namespace}/{name}"
        claim = book.templates.get(key) if kind == "template" else book.claims.get(key)
        if claim is None:
            continue  # not seen yet: the claim's own event restates the pod
        if not claim.allocated:
            _ask(book, claim, need)
        elif claim.node is not None and claim.node == pod.node and _charged_to(claim, pod):
            _held(claim, cards_of(claim.node), need)
        # else allocated, and the pod waits only to be bound there: it asks for no new device
    return need


def _charged_to(claim: DraClaim, pod: Pod) -> bool:
    """A claim several pods share holds its devices once: they are charged to the first pod
    it is reserved for."""
    return not claim.reserved_for or claim.reserved_for[0] == pod.name


def pod_with_dra(pod: Pod, uses: tuple[ClaimUse, ...], book: DraBook, cards_of: CardsOf) -> Pod:
    """The pod with its claims' GPUs in its request, and on a node the cards they hold."""
    if not uses:
        return pod
    need = need_of(pod, uses, book, cards_of)
    base = pod.requests
    extended = any(kind == "extended" for kind, _ in uses)
    # the scheduler's claim for an extended resource stands for the containers' own
    # nvidia.com/gpu; counting both would ask for the cards twice
    cards = need.cards + (0 if extended else base.gpu_count)
    if cards == 0 and not need.mig:
        return pod
    mig = Counter() if extended else Counter(base.mig)
    mig.update(need.mig)
    requests = {
        **base.model_dump(),
        "gpu_count": cards,
        "gpu_milli": MILLI_PER_GPU if cards else 0,
        "mig": dict(mig),
        "gpu_memory_mib": need.memory_mib if cards else None,
        "gpu_dra": True,
    }
    if not cards:
        requests.update(gpu_memory_pct=None, gpu_cores_pct=None)
    indices = tuple(need.indices) if pod.node and len(need.indices) == cards else ()
    try:
        return Pod.model_validate(
            {
                **pod.model_dump(),
                "requests": requests,
                "gpu_indices": indices,
                "gpu_models": pod.gpu_models or tuple(sorted(need.models)),
            }
        )
    except ValidationError as exc:
        raise refused_fields(exc, where="DRA claims") from None
