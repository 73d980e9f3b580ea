"""A simulated cluster driven by a trace: the event stream a real cluster would have produced.

Nodes are added; pods are created pending; the simulated scheduler (``streams.placement``, the
stand-in for kube-scheduler) binds them through a placement policy or leaves them pending with a
FailedScheduling event in kube-scheduler's wording; pods are deleted. Two modes:

- ``timeline``: the trace's own creation and deletion times (optionally compressed); pending
  pods are retried whenever a deletion frees room on a node, as kube-scheduler requeues them.
- ``fgd``: the FGD paper's protocol: shuffle with a seed, pad with random clones to ``ratio`` x
  GPU capacity, arrivals only (one a second), a pod that fits nowhere is dropped at once.
"""

from __future__ import annotations

import heapq
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

import numpy as np

from connectors.trace.alibaba_csv import TraceNode, TracePod
from models import (
    Envelope,
    Node,
    NodeEvent,
    Pod,
    PodEvent,
    PodPhase,
    QosClass,
    ResourceRequest,
    SchedulerEvent,
    SchedulingEvent,
    TraceSettings,
)
from models.settings import OomStormSettings
from streams.fragmentation.measure import FragMeasure
from streams.fragmentation.shapes import PodShape, TypicalPods
from streams.placement.cluster_arrays import SimCluster
from streams.placement.experiment import arrival_sequence
from streams.placement.policies import make_policy
from streams.placement.sim_scheduler import Placement, SimScheduler
from streams.placement.spec import NodeSpec, PodSpec
from streams.simulation.incidents import StormInjector, plan
from streams.simulation.sim_actuator import Barrier, SimActuator

NAMESPACE = "trace"


FGD_DECISION_DELAY = timedelta(milliseconds=500)
QOS_PRIORITY = {"Guaranteed": 1000, "LS": 1000, "Burstable": 500, "BE": 0}
"""The trace has no priorities; its QoS class is the closest. Alibaba's LS (latency-sensitive)
pods outrank BE (best-effort) ones, which are the preemptible kind; Kubernetes' Guaranteed and
Burstable classes (107 of the 8,152 pods) rank with and between them."""


class TraceMode(StrEnum):
    TIMELINE = "timeline"
    FGD = "fgd"


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayOptions:
    mode: TraceMode = TraceMode.TIMELINE
    policy: str = "fgd"
    seed: int = 42
    ratio: float = 1.3
    """fgd mode: pad the workload to this multiple of the cluster's GPU capacity."""
    time_scale: float = 1.0
    """timeline mode: divide trace times by this, to compress a long trace."""
    node_limit: int | None = None
    """Use only the first N nodes of the node list (a smaller cluster fills up sooner)."""
    source: str = "trace"
    enforce_actions: bool = False
    """Close the loop: where the scheduler fails a pod, wait for the pipeline's actions for
    that instant and apply them (``streams/simulation/sim_actuator.py``) before going on."""
    inject_oom_storms: int = 0
    """Scripted OOM incidents (and background OOMs) added to the stream at seeded times and
    places (``streams/simulation/incidents.py``); the simulated scheduler does not see them."""


class TraceReplayError(ValueError):
    """The trace cannot be replayed in the asked mode."""


@dataclass(frozen=True, slots=True)
class Evicted:
    src: TracePod
    placement: Placement


@dataclass(frozen=True, slots=True)
class ReplayStats:
    nodes: int
    pods: int
    bound: int
    failed_attempts: int
    deleted: int


def _qos(pod: TracePod) -> QosClass | None:
    if pod.qos is None:
        return None
    try:
        return QosClass(pod.qos)
    except ValueError:
        known = ", ".join(q.value for q in QosClass)
        raise TraceReplayError(f"pod {pod.name}: unknown qos {pod.qos!r}; known: {known}") from None


def _spec(pod: TracePod, name: str | None = None) -> PodSpec:
    shape = PodShape(pod.cpu_milli, pod.gpu_milli, pod.num_gpu, "|".join(pod.gpu_spec))
    return PodSpec(name=name or pod.name, shape=shape, memory_mib=pod.memory_mib)


class SimulatedCluster:
    """Produces the events; ``stats`` is filled as the iterator is consumed."""

    def __init__(
        self,
        nodes: Sequence[TraceNode],
        pods: Sequence[TracePod],
        *,
        options: ReplayOptions,
        trace: TraceSettings | None = None,
        oom_storm: OomStormSettings | None = None,
    ) -> None:
        """``oom_storm``: the thresholds injected incidents are spaced for (default settings)."""
        if options.node_limit is not None:
            if options.node_limit < 1:
                raise TraceReplayError("node_limit must be at least 1")
            nodes = nodes[: options.node_limit]
        if not nodes:
            raise TraceReplayError("the node list is empty")
        if options.time_scale <= 0:
            raise TraceReplayError("time_scale must be positive")
        if options.inject_oom_storms < 0:
            raise TraceReplayError("inject_oom_storms must be 0 or more")
        if options.inject_oom_storms and not any(n.gpu_count for n in nodes):
            raise TraceReplayError("no node has a GPU card to inject OOM storms on")
        self.nodes = list(nodes)
        self.pods = list(pods)
        self.options = options
        self.start = (trace or TraceSettings()).start
        self._by_name = {p.name: p for p in self.pods}
        rng = np.random.default_rng(options.seed)
        specs = [
            NodeSpec(n.name, n.cpu_milli, n.memory_mib, n.gpu_count, n.gpu_model)
            for n in self.nodes
        ]
        typical = TypicalPods.from_shapes(_spec(p).shape for p in self.pods)
        self.cluster = SimCluster(
            specs,
            measure=FragMeasure(typical),
            tie_rank=rng.permutation(len(specs)).astype(np.int64),
        )
        self.scheduler = SimScheduler(self.cluster, make_policy(options.policy, self.cluster), rng)
        self._rng = rng
        self._sequence: list[PodSpec] | None = None
        self._oom_storm = oom_storm or OomStormSettings()
        self.injector: StormInjector | None = None
        """What was injected, once ``events`` has started (with ``inject_oom_storms``)."""
        self.bound = 0
        self.failed = 0
        self.deleted = 0
        self.created = 0
        self.now = self.start
        """Event time of the latest event built."""
        self.actuator = SimActuator(self.scheduler, namespace=NAMESPACE, clock=lambda: self.now)
        self.made_placeable = 0
        """Pods the scheduler failed and then bound once actions were applied for them."""
        self.evicted = 0
        self._sources: dict[str, tuple[TracePod, PodSpec, datetime]] = {}
        """Bound pods: what the actuator may evict, and what to bring back."""
        self._respawned = 0

    @property
    def stats(self) -> ReplayStats:
        return ReplayStats(
            nodes=len(self.nodes),
            pods=self.created,
            bound=self.bound,
            failed_attempts=self.failed,
            deleted=self.deleted,
        )

    def end(self) -> datetime:
        """Event time of the stream's last event, known before it runs (injected incidents are
        spread over the replay's span). In fgd mode this draws the arrival sequence, which the
        stream would draw first anyway, and keeps it: the stream is the same either way."""
        if self.options.mode == TraceMode.FGD:
            return self.start + timedelta(seconds=len(self._arrivals())) + FGD_DECISION_DELAY
        last = max((max(p.creation_time or 0, p.deletion_time or 0) for p in self.pods), default=0)
        return self.start + timedelta(seconds=last / self.options.time_scale)

    def events(self) -> Iterator[Envelope]:
        """The stream of an open loop: nothing is waited for."""
        for item in self.loop_events():
            if isinstance(item, Barrier):
                raise TraceReplayError("a closed loop's stream needs closed_loop() to run")
            yield item

    def loop_events(self) -> Iterator[Envelope | Barrier]:
        """The stream, with a ``Barrier`` after each failed scheduling when actions are
        enforced."""
        stream: Iterator[Envelope | Barrier] = self._trace_events()
        if self.options.inject_oom_storms:
            items = plan(
                storms=self.options.inject_oom_storms,
                seed=self.options.seed,
                start=self.start,
                end=self.end(),
                settings=self._oom_storm,
            )
            self.injector = StormInjector(items)
            stream = self.injector.wrap(stream)
        yield from stream

    def _trace_events(self) -> Iterator[Envelope | Barrier]:
        yield from self._node_events()
        if self.options.mode == TraceMode.FGD:
            yield from self._fgd()
        else:
            yield from self._timeline()

    # --- building events ------------------------------------------------------------------

    def _env(self, payload: NodeEvent | PodEvent | SchedulingEvent, at: datetime) -> Envelope:
        self.now = max(self.now, at)
        return Envelope.wrap(payload, event_time=at, source=self.options.source)

    def _node_events(self) -> Iterator[Envelope]:
        for n in self.nodes:
            node = Node(
                name=n.name,
                cpu_milli=n.cpu_milli,
                memory_mib=n.memory_mib,
                gpu_model=n.gpu_model,
                gpu_count=n.gpu_count,
            )
            yield self._env(NodeEvent(change="upsert", node=node), self.start)

    def _pod(self, src: TracePod, name: str, created: datetime, placement: Placement | None) -> Pod:
        return Pod(
            namespace=NAMESPACE,
            name=name,
            uid=name,
            phase=PodPhase.RUNNING if placement else PodPhase.PENDING,
            node=placement.node if placement else None,
            gpu_indices=placement.gpu_ids if placement else (),
            requests=ResourceRequest(
                cpu_milli=src.cpu_milli,
                memory_mib=src.memory_mib,
                gpu_count=src.num_gpu,
                gpu_milli=src.gpu_milli,
            ),
            gpu_models=src.gpu_spec,
            qos=_qos(src),
            priority=QOS_PRIORITY.get(src.qos or "", 0),
            preemptible=src.qos == "BE",
            queue=src.qos,  # the trace has no queues; its QoS class (LS, BE, ...) is the closest
            created_at=created,
        )

    def _try_schedule(
        self, src: TracePod, spec: PodSpec, created: datetime, at: datetime
    ) -> tuple[list[Envelope], bool]:
        result = self.scheduler.schedule(spec)
        if isinstance(result, Placement):
            self.bound += 1
            self._sources[spec.name] = (src, spec, created)
            pod = self._pod(src, spec.name, created, result)
            return [self._env(PodEvent(change="upsert", pod=pod), at)], True
        self.failed += 1
        event = SchedulerEvent(
            reason="FailedScheduling",
            message=result.message,
            pod_namespace=NAMESPACE,
            pod_name=spec.name,
            pod_uid=spec.name,
        )
        return [self._env(SchedulingEvent(event=event), at)], False

    def _create(
        self, src: TracePod, spec: PodSpec, at: datetime, *, decided_at: datetime | None = None
    ) -> tuple[list[Envelope], bool]:
        """The pod appears (pending) at ``at``; the scheduler decides at ``decided_at``
        (default: the same instant)."""
        self.created += 1
        pending = self._pod(src, spec.name, at, None)
        out = [self._env(PodEvent(change="upsert", pod=pending), at)]
        more, placed = self._try_schedule(src, spec, at, decided_at or at)
        return out + more, placed

    def _delete(self, src: TracePod, name: str, created: datetime, at: datetime) -> Envelope:
        self.deleted += 1
        self._sources.pop(name, None)
        pod = self._pod(src, name, created, None)
        return self._env(PodEvent(change="delete", pod=pod), at)

    # --- modes ------------------------------------------------------------------------------

    def _arrivals(self) -> list[PodSpec]:
        if self._sequence is None:
            self._sequence = arrival_sequence(
                [_spec(p) for p in self.pods],
                capacity_milli=self.cluster.capacity_milli,
                ratio=self.options.ratio,
                rng=self._rng,
            )
        return self._sequence

    def _fgd(self) -> Iterator[Envelope | Barrier]:
        for k, spec in enumerate(self._arrivals()):
            at = self.start + timedelta(seconds=k + 1)
            # The scheduler's attempt comes half a second after the pod: the pod is pending for
            # one instant, so a pod the cluster cannot take is seen pending (and explained)
            # before the protocol drops it, as a real scheduler's queue would show it.
            decided = at + FGD_DECISION_DELAY
            src = self._by_name[spec.name.split("-clone-")[0]]
            out, placed = self._create(src, spec, at, decided_at=decided)
            yield from out
            if not placed and self.options.enforce_actions:
                yield Barrier(decided)
                freed = yield from self._evict(decided)
                if freed:
                    more, placed = self._try_schedule(src, spec, at, decided)
                    yield from more
                    self.made_placeable += placed
                    yield from self._respawn(freed, decided)
            if not placed:
                yield self._delete(src, spec.name, at, decided)

    def _timeline(self) -> Iterator[Envelope | Barrier]:
        scale = self.options.time_scale
        # (time, step, order, name): at one instant deletions free room before creations, and a
        # pod deleted the instant it is created is deleted after its creation.
        heap: list[tuple[float, int, int, str]] = []
        for order, p in enumerate(self.pods):
            if p.creation_time is None:
                raise TraceReplayError(
                    f"pod {p.name} has no creation_time; timeline mode needs the full column "
                    "layout (use the fgd mode for pod lists without times)"
                )
            heapq.heappush(heap, (p.creation_time / scale, 1, order, p.name))
            if p.deletion_time is not None:
                step = 2 if p.deletion_time == p.creation_time else 0
                heapq.heappush(heap, (p.deletion_time / scale, step, order, p.name))
        created: dict[str, datetime] = {}
        pending: dict[str, None] = {}  # insertion-ordered: kube-scheduler's FIFO, by creation
        while heap:
            t, what, _, name = heapq.heappop(heap)
            at = self.start + timedelta(seconds=t)
            src = self._by_name[name]
            if what == 1:
                created[name] = at
                out, placed = self._create(src, _spec(src), at)
                yield from out
                if not placed:
                    pending[name] = None
                    if self.options.enforce_actions:
                        yield Barrier(at)
                        for victim in (yield from self._evict(at)):
                            # its own deletion later finds it gone
                            created.pop(victim.placement.pod.name, None)
                            before = len(pending)
                            node = self.cluster.index[victim.placement.node]
                            yield from self._retry(node, pending, created, at)
                            self.made_placeable += before - len(pending)
                continue
            if name not in created:
                continue
            freed = self.scheduler.release(name)
            pending.pop(name, None)
            yield self._delete(src, name, created.pop(name), at)
            if freed is not None and pending:
                yield from self._retry(self.cluster.index[freed.node], pending, created, at)

    def _evict(self, at: datetime) -> Generator[Envelope, None, list[Evicted]]:
        """Apply the evictions the actuator took; returns what they freed (a generator's
        return value: ``freed = yield from self._evict(at)``)."""
        freed: list[Evicted] = []
        for request in self.actuator.take():
            entry = self._sources.get(request.name)
            placement = self.scheduler.release(request.name)
            if entry is None or placement is None:
                continue
            src, _, created = entry
            self.evicted += 1
            yield self._delete(src, request.name, created, at)
            freed.append(Evicted(src, placement))
        return freed

    def _respawn(self, freed: list[Evicted], at: datetime) -> Iterator[Envelope]:
        """Evicted pods come back as new pending pods, as their controller would recreate
        them; under the FGD protocol one that fits nowhere is dropped, like any arrival."""
        for gone in freed:
            self._respawned += 1
            spec = gone.placement.pod
            src = gone.src
            again = PodSpec(
                name=f"{src.name}-r{self._respawned}",
                shape=spec.shape,
                memory_mib=spec.memory_mib,
            )
            out, placed = self._create(src, again, at)
            yield from out
            if not placed:
                yield self._delete(src, again.name, at, at)

    def _retry(
        self, node: int, pending: dict[str, None], created: dict[str, datetime], at: datetime
    ) -> Iterator[Envelope]:
        """After a deletion only the freed node can newly fit a pending pod: check it first."""
        c = self.cluster
        for name in list(pending):
            src = self._by_name[name]
            spec = _spec(src)
            shape = spec.shape
            if (
                c.cpu_free[node] < shape.cpu_milli
                or c.mem_free[node] < spec.memory_mib
                or (shape.gpu_count and not c.model_mask(shape.gpu_models)[node])
                or int((c.gpus_of(node) >= shape.gpu_milli).sum()) < shape.gpu_count
            ):
                continue
            out, placed = self._try_schedule(src, spec, created[name], at)
            if placed:
                del pending[name]
                yield from out
