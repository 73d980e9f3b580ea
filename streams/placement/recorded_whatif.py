"""What-if on recorded history: the pods a cluster really saw, placed again under another
policy, in their recorded event-time order.

Each pod arrives when it was created. A pod that ran in the recording keeps its recorded
runtime (deletion less binding) from wherever the what-if binds it; a pod that never ran in the
recording has no runtime to go by, so once placed it stays to the end of the window, and while
pending it leaves at its recorded deletion (its owner gave up then). A pending pod is tried
again whenever a departure frees room, first-come first-served, as kube-scheduler requeues.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import numpy as np

from streams.fragmentation.measure import FragMeasure
from streams.fragmentation.shapes import TypicalPods
from streams.placement.cluster_arrays import SimCluster
from streams.placement.policies import make_policy
from streams.placement.sim_scheduler import Placement, SimScheduler
from streams.placement.spec import NodeSpec, PodSpec

__all__ = ["CurvePoint", "RecordedPod", "WhatIf", "replay_recorded"]

CURVE_POINTS = 200
"""Points kept of each curve: enough for a plot, small enough for JSON."""
ARRIVE, LEAVE, GIVE_UP = 1, 0, 2
"""Order within one instant: departures free room before arrivals take it; a pod that gives
up the instant it arrives gives up after its one try."""


@dataclass(frozen=True, slots=True)
class RecordedPod:
    spec: PodSpec
    arrived: datetime
    bound_at: datetime | None
    """When the recording bound it; None: it never ran."""
    deleted_at: datetime | None

    @property
    def runtime_s(self) -> float | None:
        if self.bound_at is None or self.deleted_at is None:
            return None
        return max(0.0, (self.deleted_at - self.bound_at).total_seconds())


@dataclass(frozen=True, slots=True)
class CurvePoint:
    at: datetime
    alloc_pct: float
    frag_amount_pct: float


@dataclass(slots=True)
class WhatIf:
    pods: int = 0
    failed_recorded: int = 0
    failed_whatif: int = 0
    placed_only_whatif: list[str] = field(default_factory=list)
    """Pods that never ran in the recording and would have run."""
    placed_only_recorded: list[str] = field(default_factory=list)
    alloc_pct: float = 0.0
    frag_amount_pct: float = 0.0
    queue_gpu_hours_recorded: float = 0.0
    queue_gpu_hours_whatif: float = 0.0
    curve: list[CurvePoint] = field(default_factory=list)


def replay_recorded(
    nodes: list[NodeSpec],
    pods: list[RecordedPod],
    *,
    policy: str,
    seed: int,
    end: datetime,
    typical: TypicalPods | None = None,
) -> WhatIf:
    """``end``: the window's end, up to which waiting counts as queueing."""
    rng = np.random.default_rng(seed)
    measure = FragMeasure(typical or TypicalPods.from_shapes(p.spec.shape for p in pods))
    cluster = SimCluster(
        nodes, measure=measure, tie_rank=rng.permutation(len(nodes)).astype(np.int64)
    )
    scheduler = SimScheduler(cluster, make_policy(policy, cluster), rng)
    run = _Run(cluster, scheduler, end)
    heap: list[tuple[datetime, int, int, str]] = []
    by_name = {p.spec.name: p for p in pods}
    order = {p.spec.name: n for n, p in enumerate(pods)}
    for n, p in enumerate(pods):
        heapq.heappush(heap, (p.arrived, ARRIVE, n, p.spec.name))
        if p.deleted_at is not None and p.bound_at is None:
            heapq.heappush(heap, (max(p.deleted_at, p.arrived), GIVE_UP, n, p.spec.name))
    every = max(1, (2 * len(pods)) // CURVE_POINTS)
    steps = 0
    while heap:
        at, what, n, name = heapq.heappop(heap)
        pod = by_name[name]
        if what == ARRIVE:
            if run.try_place(pod, at):
                _leave_later(heap, pod, at, n)
            else:
                run.pending[name] = at
        elif what == GIVE_UP:
            run.give_up(name, at)
        else:
            freed = scheduler.release(name)
            if freed is not None:
                for placed, when in run.retry(freed, by_name, at):
                    _leave_later(heap, placed, when, order[placed.spec.name])
        steps += 1
        if steps % every == 0:
            run.sample(at)
    return run.result(pods)


def _leave_later(
    heap: list[tuple[datetime, int, int, str]], pod: RecordedPod, placed_at: datetime, n: int
) -> None:
    runtime = pod.runtime_s
    if runtime is not None:
        heapq.heappush(heap, (placed_at + timedelta(seconds=runtime), LEAVE, n, pod.spec.name))


class _Run:
    def __init__(self, cluster: SimCluster, scheduler: SimScheduler, end: datetime) -> None:
        self.cluster, self.scheduler, self.end = cluster, scheduler, end
        self.pending: dict[str, datetime] = {}
        """Waiting pods by name (insertion order: first come, first tried), since when."""
        self.waited_s: dict[str, float] = {}
        self.placed: set[str] = set()
        self.curve: list[CurvePoint] = []

    def try_place(self, pod: RecordedPod, at: datetime) -> bool:
        if not isinstance(self.scheduler.schedule(pod.spec), Placement):
            return False
        self.placed.add(pod.spec.name)
        return True

    def give_up(self, name: str, at: datetime) -> None:
        since = self.pending.pop(name, None)
        if since is not None:
            self.waited_s[name] = (at - since).total_seconds()

    def retry(
        self, freed: Placement, by_name: dict[str, RecordedPod], at: datetime
    ) -> list[tuple[RecordedPod, datetime]]:
        node = self.cluster.index[freed.node]
        c = self.cluster
        out = []
        for name, since in list(self.pending.items()):
            spec = by_name[name].spec
            shape = spec.shape
            if (
                c.cpu_free[node] < shape.cpu_milli
                or c.mem_free[node] < spec.memory_mib
                or int((c.gpus_of(node) >= shape.gpu_milli).sum()) < shape.gpu_count
            ):
                continue
            if self.try_place(by_name[name], at):
                del self.pending[name]
                self.waited_s[name] = (at - since).total_seconds()
                out.append((by_name[name], at))
        return out

    def sample(self, at: datetime) -> None:
        c = self.cluster
        cap = c.capacity_milli or 1
        self.curve.append(
            CurvePoint(at, c.allocated_milli / cap * 100.0, c.frag_milli / cap * 100.0)
        )

    def result(self, pods: list[RecordedPod]) -> WhatIf:
        out = WhatIf(pods=len(pods))
        for name, since in self.pending.items():  # still waiting at the end of the window
            self.waited_s[name] = max(0.0, (self.end - since).total_seconds())
        for p in pods:
            name = p.spec.name
            gpus = p.spec.shape.gpu_count * p.spec.shape.gpu_milli / 1000.0
            out.queue_gpu_hours_whatif += self.waited_s.get(name, 0.0) * gpus / 3600.0
            waited = ((p.bound_at or p.deleted_at or self.end) - p.arrived).total_seconds()
            out.queue_gpu_hours_recorded += max(0.0, waited) * gpus / 3600.0
            ran, runs = p.bound_at is not None, name in self.placed
            out.failed_recorded += not ran
            out.failed_whatif += not runs
            if runs and not ran:
                out.placed_only_whatif.append(name)
            if ran and not runs:
                out.placed_only_recorded.append(name)
        c = self.cluster
        cap = c.capacity_milli or 1
        out.alloc_pct = c.allocated_milli / cap * 100.0
        out.frag_amount_pct = c.frag_milli / cap * 100.0
        out.curve = self.curve
        return out
