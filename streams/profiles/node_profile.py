"""A node's profile from its object, the tasks bound to it and its cards' telemetry.

The derivation is a pure function (``node_profile``). The join keeps what it takes from the node
object and the bound tasks alone (the card layout, the requested totals: ``NodeDerived``) and
each card's state between inputs, so that a GPU sample, the most common input by far (8,000 a
second at 10,000 nodes), re-derives the one card it reads and nothing else: re-deriving the
whole node per input was 2.7 s of a 22 s replay (9,559 calls) and most of the join's time in
the ingest bench. The cached parts are built by the same functions as a derivation from
scratch, so the two agree by construction (``tests/streams/test_profiles_property.py``).

A new layout (a node or binding change) is validated once, as before; the states a GPU sample
re-derives are built with ``models.trusted``: the sample was validated at the edge and the
layout with the last change, so validating them again per sample only cost time (a GpuState and
a NodeProfile per sample). Fields pydantic would coerce (an int MiB into a float field) are
coerced here, so the result dumps to the same bytes (``tests/streams/test_fuzz_edge_join.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TypeVar

from models import GpuState, Node, NodeProfile, PodPhase, TaskProfile, trusted
from models.cards import SharingMode
from streams.profiles.card_layout import LaidCard, lay_cards
from streams.profiles.health import CardHealth
from streams.profiles.quiet import QuietRules, QuietRun
from streams.profiles.system_oom import SystemOoms

__all__ = [
    "CardKey",
    "CardRules",
    "GpuTelemetry",
    "NodeDerived",
    "card_telemetry",
    "derive",
    "holds_resources",
    "node_profile",
    "profile_of",
]

_K = TypeVar("_K")

TERMINAL_PHASES = frozenset({PodPhase.SUCCEEDED, PodPhase.FAILED})


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


CardKey = tuple[int, int | None]
"""(card index, MIG instance): each MIG instance reports its own memory, so keyed by the card
alone the last instance read overwrote the others (9,216 of a card holding 40,960 MiB)."""


def card_telemetry(telemetry: dict[CardKey, GpuTelemetry], index: int) -> GpuTelemetry | None:
    """One card's figures: its own reading, or the sum over its MIG instances (a card
    partitioned into instances has memory only in them)."""
    whole = telemetry.get((index, None))
    parts = _parts(telemetry, index)
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


def _parts(telemetry: dict[CardKey, GpuTelemetry], index: int) -> list[GpuTelemetry]:
    """The card's MIG instances' readings, by instance."""
    return [
        t for (i, m), t in sorted(telemetry.items(), key=_order) if i == index and m is not None
    ]


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


@dataclass(slots=True)
class NodeDerived:
    """What a node's profile takes from its object and its bound tasks alone, with each
    card's state once built; the join drops it when the node or a binding changes, and one
    card's state when that card's telemetry changes."""

    held: tuple[TaskProfile, ...]
    """Tasks holding resources here, by key."""
    bound_at: dict[str, datetime]
    cards: tuple[LaidCard, ...]
    """The layout under physical indices (``_numbered``), for ``mig_seen``."""
    mig_seen: tuple[int, ...]
    """Cards whose MIG instances have readings: the numbering depends on them."""
    cpu_milli_requested: int
    memory_mib_requested: int
    gpus: dict[int, GpuState] = field(default_factory=dict)
    """Each card's state by index, built when first asked for."""


def mig_seen(telemetry: dict[CardKey, GpuTelemetry]) -> tuple[int, ...]:
    return tuple(sorted({i for i, m in telemetry if m is not None}))


def derive(
    node: Node, tasks: Iterable[TaskProfile], telemetry: dict[CardKey, GpuTelemetry]
) -> NodeDerived:
    held = tuple(sorted((t for t in tasks if holds_resources(t)), key=lambda t: t.key))
    layout = lay_cards(node, [(t.key, t.requests, t.gpu_indices) for t in held])
    return NodeDerived(
        held=held,
        bound_at={t.key: t.bound_at for t in held if t.bound_at is not None},
        cards=tuple(_numbered(layout.cards, telemetry)),
        mig_seen=mig_seen(telemetry),
        cpu_milli_requested=sum(t.requests.cpu_milli for t in held),
        memory_mib_requested=sum(t.requests.memory_mib for t in held),
    )


def _floats(values: dict[_K, float]) -> dict[_K, float]:
    return {k: float(v) for k, v in values.items()}


def _float(value: float | None) -> float | None:
    return None if value is None else float(value)


def gpu_state(
    node: Node,
    card: LaidCard,
    telemetry: dict[CardKey, GpuTelemetry],
    bound_at: dict[str, datetime],
    rules: CardRules | None,
    *,
    validate: bool,
) -> GpuState:
    """One card's state: its share of the layout, its telemetry, its health; validated when
    ``validate`` (a new layout), else built as it is (``models.trusted``)."""
    tel = card_telemetry(telemetry, card.index)
    health = tel.health if tel else CardHealth()
    quiet = _held_by(tel.quiet if tel else None, card.pods, bound_at, rules)
    total = tel.memory_total_mib if tel and tel.memory_total_mib else card.memory_total_mib
    values = {
        "index": card.index,
        "milli_free": card.milli_free,
        "mode": card.mode,
        "units": card.units,
        "units_free": card.free,
        "mig_free": {p: n for p, n in card.mig_free.items() if n},
        "mig_used": {p: n for p, n in card.mig_used.items() if n},
        "memory_free_mib": card.memory_free_mib,
        "slots_free": card.slots_free if card.mode is SharingMode.HAMI else None,
        "pods": tuple(card.pods),
        "pod_memory_mib": _floats(dict(tel.pods)) if tel else {},
        "memory_total_mib": _float(total),
        "memory_used_mib": _float(tel.memory_used_mib) if tel else None,
        "instance_memory_used_mib": _floats(_instances(telemetry, card.index)),
        "healthy": not health.faulted and not node.problems and card.index not in node.card_taints,
        "last_xid": tel.last_xid if tel else None,
        "fault": health.fault,
        "fault_code": health.code,
        "fault_since": health.since,
        "quiet_since": quiet.since if quiet else None,
        "quiet_held": bool(quiet and quiet.held),
        "quiet_peak_mib": _float(quiet.peak_mib) if quiet else None,
        "quiet_peak_activity_pct": round(float(quiet.peak_activity_pct), 1) if quiet else None,
    }
    return GpuState.model_validate(values) if validate else trusted(GpuState, values)


def profile_of(
    node: Node,
    derived: NodeDerived,
    telemetry: dict[CardKey, GpuTelemetry],
    *,
    at: datetime,
    system_ooms: SystemOoms | None = None,
    rules: CardRules | None = None,
    validate: bool = True,
) -> NodeProfile:
    """The node's profile from what ``derive`` took from it, building each card's state that
    ``derived`` does not hold yet (and keeping it there).

    ``validate`` is for a new ``derived``: what the layout computed from the node and its
    bound pods is checked once, as before (a node with MIG instances but no GPU model is
    refused here, and its event dead-lettered); the samples that follow change only values
    read from validated samples, and their states are built without it."""
    gpus = derived.gpus
    states = []
    for card in derived.cards:
        state = gpus.get(card.index)
        if state is None:
            state = gpus[card.index] = gpu_state(
                node, card, telemetry, derived.bound_at, rules, validate=validate
            )
        states.append(state)
    values = {
        "name": node.name,
        "gpu_model": node.gpu_model,
        "gpus": tuple(states),
        "cpu_milli_allocatable": node.cpu_milli,
        "cpu_milli_requested": derived.cpu_milli_requested,
        "memory_mib_allocatable": node.memory_mib,
        "memory_mib_requested": derived.memory_mib_requested,
        "labels": node.labels,
        "taints": node.taints,
        "pool": node.pool,
        "unschedulable": node.unschedulable,
        "problems": node.problems,
        "mig_device_profile": node.mig_device_profile,
        "gpu_shared_resource": node.gpu_shared_resource,
        "gpu_dra": node.gpu_dra,
        "pods": tuple(t.key for t in derived.held),
        "system_oom_count": system_ooms.count if system_ooms else 0,
        "last_system_oom": system_ooms.last_victim if system_ooms else None,
        "updated_at": at,
    }
    return NodeProfile.model_validate(values) if validate else trusted(NodeProfile, values)


def node_profile(
    node: Node,
    tasks: Sequence[TaskProfile],
    telemetry: dict[CardKey, GpuTelemetry],
    *,
    at: datetime,
    system_ooms: SystemOoms | None = None,
    rules: CardRules | None = None,
) -> NodeProfile:
    """A node's profile from its object, the tasks bound to it and its cards' telemetry."""
    return profile_of(
        node, derive(node, tasks, telemetry), telemetry, at=at, system_ooms=system_ooms, rules=rules
    )
