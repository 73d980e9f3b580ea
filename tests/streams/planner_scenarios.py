"""Small clusters for planner tests: nodes and pods through the real join and detectors, and
an independent brute force to check a plan against.

The brute force knows nothing of gpufrag's capacity index: a node is CPU, memory and a list of
free milli-GPU per card; a pod fits where CPU and memory suffice and enough cards have its
share free.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from itertools import combinations

from models import (
    DetectorSettings,
    Envelope,
    GpufragSettings,
    Node,
    NodeEvent,
    Pod,
    PodEvent,
    PodPhase,
    ResourceRequest,
    Scope,
    Severity,
    Signal,
    SignalKind,
    fingerprint_of,
)
from streams.pipeline import Pipeline, define_pipeline
from tests.streams.pipeline_feed import feed

T0 = datetime(2026, 3, 1, tzinfo=UTC)
CPU = 32_000
MEM = 256_000


@dataclass(frozen=True, slots=True)
class PodSpec:
    name: str
    gpu_milli: int
    gpu_count: int = 1
    priority: int = 0
    node: str | None = None
    cards: tuple[int, ...] = ()
    cpu_milli: int = 1000
    memory_mib: int = 1024
    namespace: str = "ml"
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def settings(**guardrails: object) -> GpufragSettings:
    detectors = DetectorSettings.model_validate({"unplaceable_pending": {"evaluate_every_s": 0}})
    return GpufragSettings.model_validate(
        {"detectors": detectors.model_dump(), "guardrails": guardrails}
    )


def pod_event(spec: PodSpec, at: datetime) -> Envelope:
    pod = Pod(
        namespace=spec.namespace,
        name=spec.name,
        uid=f"uid-{spec.name}",
        phase=PodPhase.RUNNING if spec.node else PodPhase.PENDING,
        node=spec.node,
        gpu_indices=spec.cards,
        requests=ResourceRequest(
            cpu_milli=spec.cpu_milli,
            memory_mib=spec.memory_mib,
            gpu_count=spec.gpu_count,
            gpu_milli=spec.gpu_milli,
        ),
        priority=spec.priority,
        labels=spec.labels,
        created_at=at,
    )
    return Envelope.wrap(PodEvent(change="upsert", pod=pod), event_time=at, source="test")


def build(
    nodes: dict[str, int], pods: list[PodSpec], s: GpufragSettings | None = None
) -> tuple[Pipeline, list[Signal]]:
    """``nodes``: name -> number of cards. Bound pods first, then the pending ones."""
    p = define_pipeline(s or settings()).build()
    out: list[Signal] = []
    for name, cards in nodes.items():
        node = Node(name=name, cpu_milli=CPU, memory_mib=MEM, gpu_model="A100", gpu_count=cards)
        out += feed(
            p, Envelope.wrap(NodeEvent(change="upsert", node=node), event_time=T0, source="test")
        )
    for n, spec in enumerate(sorted(pods, key=lambda s: s.node is None)):
        out += feed(p, pod_event(spec, T0 + timedelta(seconds=n + 1)))
    out += feed(p, pod_event_tick(T0 + timedelta(seconds=len(pods) + 60)))
    return p, out


def pod_event_tick(at: datetime) -> Envelope:
    """A pod of no consequence, to move event time on so every evaluation falls due."""
    return pod_event(
        PodSpec(
            name="tick",
            gpu_milli=0,
            gpu_count=0,
            cpu_milli=1,
            memory_mib=1,
            namespace="tick",
            node=None,
        ),
        at,
    )


def unplaceable(signals: list[Signal], key: str) -> Signal | None:
    return next(
        (
            s
            for s in signals
            if s.kind == SignalKind.UNPLACEABLE_PENDING and s.scope_id == key and s.state == "open"
        ),
        None,
    )


# --- the independent brute force --------------------------------------------------------------


def free_cards(nodes: dict[str, int], pods: list[PodSpec]) -> dict[str, list[int]]:
    free = {n: [1000] * c for n, c in nodes.items()}
    for p in pods:
        if p.node is not None:
            for c in p.cards:
                free[p.node][c] -= p.gpu_milli
    return free


def fits_somewhere(free: dict[str, list[int]], used_cpu: dict[str, int], target: PodSpec) -> bool:
    for node, cards in free.items():
        if CPU - used_cpu[node] < target.cpu_milli:
            continue
        if sum(1 for g in cards if g >= target.gpu_milli) >= target.gpu_count:
            return True
    return False


def fewest_victims(
    nodes: dict[str, int], pods: list[PodSpec], target: PodSpec, eligible: list[PodSpec], most: int
) -> int | None:
    """The least number of ``eligible`` pods whose removal lets ``target`` fit, by trying every
    subset (None: none of at most ``most`` pods does)."""
    for k in range(1, most + 1):
        for combo in combinations(eligible, k):
            gone = {p.name for p in combo}
            kept = [p for p in pods if p.name not in gone]
            used = {n: sum(p.cpu_milli for p in kept if p.node == n) for n in nodes}
            if fits_somewhere(free_cards(nodes, kept), used, target):
                return k
    return None


def random_cluster(rng: random.Random) -> tuple[dict[str, int], list[PodSpec]]:
    """Two or three nodes of 2-4 cards, filled with shares of random size and priority."""
    nodes = {f"n{i}": rng.randint(2, 4) for i in range(rng.randint(2, 3))}
    free = {n: [1000] * c for n, c in nodes.items()}
    pods: list[PodSpec] = []
    for n in range(rng.randint(4, 12)):
        share = rng.choice([250, 500, 500, 750, 1000])
        node = rng.choice(sorted(nodes))
        cards = [c for c, g in enumerate(free[node]) if g >= share]
        if not cards:
            continue
        card = rng.choice(cards)
        free[node][card] -= share
        pods.append(
            PodSpec(
                name=f"p{n}", gpu_milli=share, priority=rng.randint(0, 3), node=node, cards=(card,)
            )
        )
    return nodes, pods


def health_signal(state: str, node: str = "a", card: int = 0) -> Signal:
    """A gpu_unhealthy signal for card ``card`` of ``node``, open or resolved."""
    scope_id = f"{node}/{card}"
    at = T0 + timedelta(minutes=5)
    return Signal(
        kind=SignalKind.GPU_UNHEALTHY,
        scope=Scope.GPU,
        scope_id=scope_id,
        fingerprint=fingerprint_of(SignalKind.GPU_UNHEALTHY, Scope.GPU, scope_id),
        severity=Severity.CRITICAL,
        summary=f"GPU {scope_id} out of service: XID 79",
        evidence={"pods": ["ml/s1"]},
        opened_at=T0,
        resolved_at=at if state == "resolved" else None,
        state="resolved" if state == "resolved" else "open",
    )
