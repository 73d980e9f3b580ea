"""The queue view: per Kueue ClusterQueue, Volcano Queue and namespace ResourceQuota, how much
GPU it is guaranteed, uses, borrows and has waiting, from the quota objects and the pods.

Amounts are keyed by the resource name pods request (``nvidia.com/gpu``, ``nvidia.com/mig-
1g.10gb``), as ``models.QueueObject`` keeps them. Usage is the larger of what the object
reports (its status) and what the pods bound under it request: a status lags binding by its
controller's sync, and a pod appears in the view as soon as it is bound. Pending demand is
likewise the larger of the waiting Workloads or PodGroups and the pending pods: Kueue's
suspended Jobs have no pods yet, gated pods and Volcano gangs have both, and work seen both ways
must count once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from models import PodPhase, QueueObject, QueueSourceKind, TaskProfile
from models.analysis import QuotaBlock

Amounts = dict[str, float]
Place = tuple[str, str]
"""(namespace, the pod's queue name or "" for none)."""

GPU = "nvidia.com/gpu"
GPU_SHARED = "nvidia.com/gpu.shared"
MIG_PREFIX = "nvidia.com/mig-"
GPU_MEMORY = "nvidia.com/gpumem"
WAITING_STATES = frozenset({"Pending"})
"""Workload and PodGroup states of work not yet admitted by its queue (a Workload without
QuotaReserved; a PodGroup not yet Inqueue)."""
EPSILON = 1e-9


def task_amounts(task: TaskProfile) -> Amounts:
    """What a pod counts against a quota, under the resource names quotas use."""
    r = task.requests
    out: Amounts = {}
    if r.gpu_count:
        out[GPU_SHARED if r.gpu_shared_resource else GPU] = float(r.gpu_count)
        if r.gpu_memory_mib is not None:
            out[GPU_MEMORY] = float(r.gpu_memory_mib * r.gpu_count)  # HAMi counts every card
    for profile, n in r.mig.items():
        out[f"{MIG_PREFIX}{profile}"] = float(n)
    return out


def _add(into: Amounts, amounts: Mapping[str, float], sign: float = 1.0) -> None:
    for k, v in amounts.items():
        left = into.get(k, 0.0) + sign * v
        if abs(left) < EPSILON:
            into.pop(k, None)
        else:
            into[k] = left


def _total(parts: Iterable[Mapping[str, float]]) -> Amounts:
    out: Amounts = {}
    for part in parts:
        _add(out, part)
    return out


def _minus(a: Mapping[str, float], b: Mapping[str, float]) -> Amounts:
    return {k: max(0.0, v - b.get(k, 0.0)) for k, v in a.items()}


def _larger(a: Mapping[str, float], b: Mapping[str, float]) -> Amounts:
    return {k: max(a.get(k, 0.0), b.get(k, 0.0)) for k in sorted(set(a) | set(b))}


@dataclass(slots=True)
class QueueTally:
    """GPU requested by bound and by pending pods, per (namespace, queue): kept by the view on
    every task delta, so the ledgers cost nothing per pod to build."""

    bound: dict[Place, Amounts] = field(default_factory=dict)
    pending: dict[Place, Amounts] = field(default_factory=dict)

    @staticmethod
    def share(task: TaskProfile | None) -> tuple[Place, bool, Amounts] | None:
        """Where a task counts, whether bound (else pending), and what; None: nowhere."""
        if task is None or task.phase not in (PodPhase.PENDING, PodPhase.RUNNING):
            return None
        amounts = task_amounts(task)
        if not amounts:
            return None
        place = (task.key.split("/", 1)[0], task.queue or "")
        return place, task.node is not None, amounts

    def move(self, old: TaskProfile | None, new: TaskProfile | None) -> bool:
        """Replace a task's share; True when it changed."""
        before, after = self.share(old), self.share(new)
        if before == after:
            return False
        for share, sign in ((before, -1.0), (after, 1.0)):
            if share is not None:
                place, bound, amounts = share
                book = self.bound if bound else self.pending
                _add(book.setdefault(place, {}), amounts, sign)
                if not book[place]:
                    del book[place]
        return True

    def of(self, places: Iterable[Place], *, bound: bool) -> Amounts:
        book = self.bound if bound else self.pending
        return _total(book.get(p, {}) for p in places)

    def places(self) -> set[Place]:
        return set(self.bound) | set(self.pending)


@dataclass(frozen=True, slots=True)
class QueueQuota:
    """One quota: a ClusterQueue, a Volcano Queue or a namespace ResourceQuota."""

    key: str
    cohort: str | None
    """Queues that lend each other unused quota: a Kueue cohort; for Volcano, the queues under
    one parent (all top-level queues share the cluster); None for a ResourceQuota."""
    guaranteed: Amounts
    limit: Amounts
    """Ceiling with borrowing; a resource absent here may borrow without bound."""
    used: Amounts
    pending: Amounts

    @property
    def borrowed(self) -> Amounts:
        return {
            k: v - self.guaranteed.get(k, 0.0)
            for k, v in self.used.items()
            if v > self.guaranteed.get(k, 0.0) + EPSILON
        }

    def idle(self, resource: str) -> float:
        """Guaranteed quota it does not use: what it lends its cohort."""
        return max(0.0, self.guaranteed.get(resource, 0.0) - self.used.get(resource, 0.0))

    def ceiling(self, resource: str) -> float | None:
        """The most it may use of its own accord: its limit, or without a cohort to borrow
        from its guaranteed share; None: bounded only by what its cohort has free."""
        if resource in self.limit:
            return self.limit[resource]
        if self.cohort is None:
            return self.guaranteed.get(resource, 0.0)
        return None

    def block(self, resource: str, *, asked: float, room: float) -> QuotaBlock:
        """Its figures for ``resource``, as a pending pod's explanation carries them."""
        return QuotaBlock(
            key=self.key,
            resource=resource,
            requested=asked,
            used=self.used.get(resource, 0.0),
            nominal=self.guaranteed.get(resource, 0.0),
            limit=self.ceiling(resource),
            room=room,
        )

    def evidence(self) -> dict[str, object]:
        return {
            "guaranteed": dict(self.guaranteed),
            "limit": dict(self.limit),
            "used": dict(self.used),
            "borrowed": self.borrowed,
            "pending": dict(self.pending),
        }


@dataclass(frozen=True, slots=True)
class QueueView:
    queues: dict[str, QueueQuota]
    """ClusterQueues and Volcano Queues, by object key."""
    quotas: dict[str, list[QueueQuota]]
    """Namespace -> its GPU ResourceQuotas."""
    queue_of: dict[Place, str]
    """(namespace, pod's queue name) -> the queue it draws from."""

    def cohort(self, ledger: QueueQuota) -> list[QueueQuota]:
        if ledger.cohort is None:
            return [ledger]
        return [q for q in self.queues.values() if q.cohort == ledger.cohort]

    def cohort_free(self, ledger: QueueQuota, resource: str) -> float:
        """Guaranteed quota of the cohort nobody uses (borrowers use others' share)."""
        members = self.cohort(ledger)
        free = sum(m.guaranteed.get(resource, 0.0) - m.used.get(resource, 0.0) for m in members)
        return max(0.0, free)

    def headroom(self, ledger: QueueQuota, resource: str) -> float:
        """What the queue could still take: its idle share and what it may borrow."""
        used = ledger.used.get(resource, 0.0)
        room = ledger.idle(resource) + max(
            0.0, self.cohort_free(ledger, resource) - ledger.idle(resource)
        )
        if ledger.cohort is not None and resource in ledger.limit:
            room = min(room, max(0.0, ledger.limit[resource] - used))
        return room

    def blockers(self, task: TaskProfile) -> tuple[str, ...]:
        """The keys of ``blocks``."""
        return tuple(b.key for b in self.blocks(task))

    def blocks(self, task: TaskProfile) -> tuple[QuotaBlock, ...]:
        """The queue with no room for a pending pod, with its figures. Not its namespace's
        ResourceQuota: the API server charged the pod to it when it was created (and would
        have refused it over the limit), so a pod that exists has passed its quota."""
        namespace = task.key.split("/", 1)[0]
        queue_key = self.queue_of.get((namespace, task.queue or ""))
        if queue_key is None:
            return ()
        ledger = self.queues[queue_key]
        for resource, asked in sorted(task_amounts(task).items()):
            if resource not in ledger.guaranteed:
                continue
            room = self.headroom(ledger, resource)
            if room < asked - EPSILON:
                return (ledger.block(resource, asked=asked, room=room),)
        return ()


def queue_view(objects: Mapping[str, QueueObject], tally: QueueTally) -> QueueView:
    """The ledgers from the quota objects the view holds and the tally of its pods."""
    by_kind: dict[QueueSourceKind, list[QueueObject]] = {}
    for key in sorted(objects):
        obj = objects[key]
        by_kind.setdefault(obj.source_kind, []).append(obj)
    waiting = [
        o
        for kind in (QueueSourceKind.WORKLOAD, QueueSourceKind.POD_GROUP)
        for o in by_kind.get(kind, [])
        if o.state in WAITING_STATES
    ]
    queue_of: dict[Place, str] = {}
    queues: dict[str, QueueQuota] = {}
    local = by_kind.get(QueueSourceKind.LOCAL_QUEUE, [])
    for cq in by_kind.get(QueueSourceKind.CLUSTER_QUEUE, []):
        places = [(lq.namespace or "", lq.name) for lq in local if lq.parent == cq.name]
        queue_of.update((p, cq.key) for p in places)
        demand = [
            w.requested
            for w in waiting
            if w.source_kind is QueueSourceKind.WORKLOAD and (w.namespace, w.parent) in places
        ]
        queues[cq.key] = _ledger(cq, cq.cohort, places, tally, demand)
    for vq in by_kind.get(QueueSourceKind.VOLCANO_QUEUE, []):
        # a Volcano queue is cluster-wide: its pods name it from any namespace
        places = [p for p in tally.places() if p[1] == vq.name]
        queue_of.update((p, vq.key) for p in places)
        demand = [
            g.requested
            for g in waiting
            if g.source_kind is QueueSourceKind.POD_GROUP and g.parent == vq.name
        ]
        queues[vq.key] = _ledger(vq, f"volcano:{vq.parent or 'root'}", places, tally, demand)
    quotas: dict[str, list[QueueQuota]] = {}
    for rq in by_kind.get(QueueSourceKind.RESOURCE_QUOTA, []):
        # the quota already counts its namespace's pods, pending ones too (charged when they
        # were created): its demand is the work that has no pods yet (waiting Workloads and
        # PodGroups), and its usage what it reports less the pending pods, at least the bound
        ns = rq.namespace or "default"
        places = [p for p in tally.places() if p[0] == ns]
        waits = _total(w.requested for w in waiting if w.namespace == ns)
        charged = _minus(rq.used, tally.of(places, bound=False))
        quotas.setdefault(ns, []).append(
            QueueQuota(
                key=rq.key,
                cohort=None,
                guaranteed=dict(rq.nominal),
                limit=dict(rq.limit),
                used=_larger(charged, tally.of(places, bound=True)),
                pending=waits,
            )
        )
    return QueueView(queues=queues, quotas=quotas, queue_of=queue_of)


def _ledger(
    obj: QueueObject,
    cohort: str | None,
    places: list[Place],
    tally: QueueTally,
    demand: list[dict[str, float]],
) -> QueueQuota:
    return QueueQuota(
        key=obj.key,
        cohort=cohort,
        guaranteed=dict(obj.nominal),
        limit=dict(obj.limit),
        used=_larger(obj.used, tally.of(places, bound=True)),
        pending=_larger(_total(demand), tally.of(places, bound=False)),
    )
