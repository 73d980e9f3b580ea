"""The fragmentation analysis operator: detectors over the profiles, signals open and resolved.

Fed by profile updates (``apply``) and event time (``advance``); it has no clock of its own.
Per-node work (a node's fragment, whether it strands GPUs) happens on that node's change; the
checks that look at every node (pending pods, gangs) run at most every ``evaluate_every_s`` of
event time and only when something changed, which keeps the cost per event independent of the
cluster's size.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta

from models import (
    MILLI_PER_GPU,
    AnalysisSettings,
    NodeProfile,
    PodPhase,
    Scope,
    Severity,
    Signal,
    SignalKind,
    TaskProfile,
    fingerprint_of,
)
from streams.fragmentation.capacity import CapacityIndex
from streams.fragmentation.measure import FragMeasure
from streams.fragmentation.pending import Explanation, GangCheck, check_gang, explain_task
from streams.fragmentation.shapes import PodShape, ShapeCounter, TypicalPods
from streams.profiles.join import NodeProfileUpdate, ProfileUpdate, TaskProfileUpdate


def shape_of(task: TaskProfile) -> PodShape:
    r = task.requests
    return PodShape(
        cpu_milli=r.cpu_milli,
        gpu_milli=r.gpu_milli,
        gpu_count=r.gpu_count,
        gpu_models="|".join(task.gpu_models),
    )


@dataclass(frozen=True, slots=True)
class ClusterFragmentation:
    nodes: int
    capacity_gpus: float
    idle_gpus: float
    frag_gpus: float
    frag_amount_pct: float
    frag_ratio_pct: float
    typical_pods: int
    pending_pods: int
    unplaceable_pods: int
    stranded_nodes: int

    @property
    def alloc_pct(self) -> float:
        """GPU allocated, in % of the cluster's GPUs (unhealthy cards count as allocated)."""
        cap = self.capacity_gpus
        return (cap - self.idle_gpus) / cap * 100.0 if cap else 0.0


@dataclass(frozen=True, slots=True)
class _Smallest:
    cpu_milli: int
    memory_mib: int


class FragmentationAnalysis:
    def __init__(
        self, *, settings: AnalysisSettings | None = None, typical: TypicalPods | None = None
    ) -> None:
        self.settings = settings or AnalysisSettings()
        self._fixed_typical = typical
        self._shapes = ShapeCounter(coverage=self.settings.coverage)
        self._min_memory: dict[PodShape, int] = {}
        self._typical = typical or TypicalPods(
            pods=(), coverage=self.settings.coverage, observed_pods=0
        )
        self.index = CapacityIndex(FragMeasure(self._typical))
        self.tasks: dict[str, TaskProfile] = {}
        self.pending: set[str] = set()
        self.open: dict[str, Signal] = {}
        self.explanations: dict[str, Explanation] = {}
        self._stranded: dict[str, dict[str, object]] = {}
        self._typical_dirty = False
        self._typical_built_at: datetime | None = None
        self._changed = False
        self._evaluated_at: datetime | None = None
        self.now: datetime | None = None
        self.evaluations = (
            0  # pending-queue evaluations so far; hosts persist explanations on change
        )

    # --- inputs --------------------------------------------------------------------------

    def apply(self, update: ProfileUpdate) -> list[Signal]:
        if self.now is None or update.at > self.now:
            self.now = update.at
        if isinstance(update, NodeProfileUpdate):
            self._changed = True
            if update.profile is None:
                self.index.remove(update.name)
                return self._set_stranded(update.name, None)
            self.index.upsert(update.profile)
            return self._check_stranded(update.profile)
        return self._on_task(update)

    def advance(self, event_time: datetime) -> list[Signal]:
        if self.now is not None and event_time < self.now:
            # late input never moves the clock back, but its changes are still checked now
            event_time = self.now
        self.now = event_time
        out: list[Signal] = []
        if self._typical_due(event_time):
            out += self._rebuild_typical(event_time)
        out += self._check_cluster(event_time)
        if self._changed and (
            self._evaluated_at is None
            or (event_time - self._evaluated_at).total_seconds() >= self.settings.evaluate_every_s
        ):
            out += self._evaluate_pending(event_time)
        return out

    def next_due(self) -> datetime | None:
        """When ``advance`` next has work that no input will trigger: a deferred pending-queue
        evaluation or typical-pods rebuild. Hosts call ``advance`` at that event time, so the
        work happens at the same instant whatever the input's arrival pattern."""
        dues: list[datetime] = []
        s = self.settings
        if self._changed and self._evaluated_at is not None:
            dues.append(self._evaluated_at + timedelta(seconds=s.evaluate_every_s))
        if self._typical_dirty and self._typical_built_at is not None:
            dues.append(self._typical_built_at + timedelta(seconds=s.typical_refresh_s))
        return min(dues) if dues else None

    def clock_state(self) -> dict[str, object]:
        """What decides when deferred work falls due, so a restarted host resumes on the same
        schedule (JSON-ready); the rest of the state is re-derived from the profiles."""

        def iso(t: datetime | None) -> str | None:
            return None if t is None else t.isoformat()

        return {
            "now": iso(self.now),
            "evaluated_at": iso(self._evaluated_at),
            "changed": self._changed,
            "typical_built_at": iso(self._typical_built_at),
            "typical_dirty": self._typical_dirty,
            "evaluations": self.evaluations,
        }

    def relearn_typical(self, at: datetime) -> None:
        """Rebuild the learned typical pods from the tasks applied so far (a host restoring its
        state); with a fixed workload there is nothing to learn."""
        if self._fixed_typical is None:
            self._rebuild_typical(at)

    def restore_clock(self, state: dict[str, object]) -> None:
        def when(v: object) -> datetime | None:
            return None if v is None else datetime.fromisoformat(str(v))

        self.now = when(state["now"])
        self._evaluated_at = when(state["evaluated_at"])
        self._changed = bool(state["changed"])
        self._typical_built_at = when(state["typical_built_at"])
        self._typical_dirty = bool(state["typical_dirty"])
        self.evaluations = int(str(state["evaluations"]))

    def flush(self) -> list[Signal]:
        """Evaluate whatever is outstanding now, e.g. at the end of a replay."""
        if self.now is None:
            return []
        out: list[Signal] = []
        if self._typical_dirty:
            out += self._rebuild_typical(self.now)
        out += self._check_cluster(self.now)
        if self._changed:
            out += self._evaluate_pending(self.now)
        return out

    # --- state views -----------------------------------------------------------------------

    @property
    def typical(self) -> TypicalPods:
        return self._typical

    def snapshot(self) -> ClusterFragmentation:
        ix = self.index
        return ClusterFragmentation(
            nodes=len(ix),
            capacity_gpus=ix.capacity_milli / MILLI_PER_GPU,
            idle_gpus=ix.idle_milli / MILLI_PER_GPU,
            frag_gpus=ix.frag_milli / MILLI_PER_GPU,
            frag_amount_pct=ix.frag_amount_pct,
            frag_ratio_pct=ix.frag_ratio_pct,
            typical_pods=len(self._typical),
            pending_pods=len(self.pending),
            unplaceable_pods=sum(
                1 for k, e in self.explanations.items() if e.unplaceable and k in self.pending
            ),
            stranded_nodes=len(self._stranded),
        )

    # --- tasks and typical pods -------------------------------------------------------------

    def _on_task(self, update: TaskProfileUpdate) -> list[Signal]:
        key = update.key
        task = update.profile
        old = self.tasks.get(key)
        if task is None:
            self.tasks.pop(key, None)
            if key in self.pending:
                self.pending.discard(key)
                self._changed = True
                return self._left_pending(key)
            return []
        if old is None and self._fixed_typical is None:
            shape = shape_of(task)
            self._shapes.observe(shape)
            mem = task.requests.memory_mib
            self._min_memory[shape] = min(mem, self._min_memory.get(shape, mem))
            self._typical_dirty = True
        self.tasks[key] = task
        is_pending = task.node is None and task.phase == PodPhase.PENDING
        if is_pending != (key in self.pending):
            (self.pending.add if is_pending else self.pending.discard)(key)
            self._changed = True
            if not is_pending:
                return self._left_pending(key)
        return []

    def _left_pending(self, key: str) -> list[Signal]:
        """A pod that is bound or gone is no longer unplaceable: say so now, not at the next
        evaluation, so the resolution carries the time it happened."""
        self.explanations.pop(key, None)
        return self._resolve(fingerprint_of(SignalKind.UNPLACEABLE_PENDING, Scope.POD, key))

    def _typical_due(self, at: datetime) -> bool:
        if not self._typical_dirty:
            return False
        if self._typical_built_at is None:
            return True
        # Rebuild on the refresh period, and sooner while the observed workload is still growing
        # fast (every 10 % more pods), so a young cluster's measure is not stuck on few pods.
        grown = len(self._shapes.counts) and sum(self._shapes.counts.values()) >= 1.1 * max(
            1, self._typical.observed_pods
        )
        elapsed = (at - self._typical_built_at).total_seconds()
        return bool(grown) or elapsed >= self.settings.typical_refresh_s

    def _rebuild_typical(self, at: datetime) -> list[Signal]:
        self._typical = self._shapes.typical()
        self._typical_dirty = False
        self._typical_built_at = at
        self.index.set_measure(FragMeasure(self._typical))
        self._changed = True
        out: list[Signal] = []
        for name, i in list(self.index.slot.items()):
            out += self._evaluate_stranded(name, i)
        return out

    def _smallest_gpu_pod(self) -> _Smallest | None:
        gpu_shapes = [tp.shape for tp in self._typical.pods if tp.shape.gpu_count > 0]
        if not gpu_shapes:
            return None
        return _Smallest(
            cpu_milli=min(s.cpu_milli for s in gpu_shapes),
            memory_mib=min(self._min_memory.get(s, 0) for s in gpu_shapes),
        )

    # --- stranded GPUs -----------------------------------------------------------------------

    def _check_stranded(self, profile: NodeProfile) -> list[Signal]:
        i = self.index.slot[profile.name]
        return self._evaluate_stranded(profile.name, i)

    def _evaluate_stranded(self, name: str, i: int) -> list[Signal]:
        smallest = self._smallest_gpu_pod()
        idle = int(self.index.node_idle[i])
        cpu_free = int(self.index.cpu_free[i])
        mem_free = int(self.index.mem_free[i])
        if smallest is None or idle == 0 or self.index.unschedulable[i]:
            return self._set_stranded(name, None)
        lacks = []
        if cpu_free < smallest.cpu_milli:
            lacks.append("cpu")
        if mem_free < smallest.memory_mib:
            lacks.append("memory")
        if not lacks:
            return self._set_stranded(name, None)
        evidence: dict[str, object] = {
            "idle_gpu_milli": idle,
            "cpu_milli_free": cpu_free,
            "memory_mib_free": mem_free,
            "lacks": lacks,
            "smallest_gpu_pod_cpu_milli": smallest.cpu_milli,
            "smallest_gpu_pod_memory_mib": smallest.memory_mib,
            "pool": self.index.pools[i],
        }
        return self._set_stranded(name, evidence)

    def _set_stranded(self, name: str, evidence: dict[str, object] | None) -> list[Signal]:
        fp = fingerprint_of(SignalKind.STRANDED_GPUS, Scope.NODE, name)
        if evidence is None:
            self._stranded.pop(name, None)
            return self._resolve(fp)
        self._stranded[name] = evidence
        idle = evidence["idle_gpu_milli"]
        lacks = " and ".join(evidence["lacks"])  # type: ignore[arg-type]
        return self._open(
            fp,
            kind=SignalKind.STRANDED_GPUS,
            scope=Scope.NODE,
            scope_id=name,
            severity=Severity.WARNING,
            summary=f"{name}: {idle} milli-GPU idle but too little {lacks} for any typical GPU pod",
            evidence=evidence,
        )

    # --- cluster fragmentation ------------------------------------------------------------------

    def _check_cluster(self, at: datetime) -> list[Signal]:
        ix = self.index
        fp = fingerprint_of(SignalKind.FRAGMENTATION, Scope.CLUSTER, "cluster")
        ratio = ix.frag_ratio_pct
        idle_gpus = ix.idle_milli / MILLI_PER_GPU
        is_open = fp in self.open
        s = self.settings
        if is_open and (ratio < s.frag_ratio_resolve_pct or idle_gpus < s.min_idle_gpus):
            return self._resolve(fp)
        if not is_open and ratio >= s.frag_ratio_open_pct and idle_gpus >= s.min_idle_gpus:
            return self._open(
                fp,
                kind=SignalKind.FRAGMENTATION,
                scope=Scope.CLUSTER,
                scope_id="cluster",
                severity=Severity.WARNING,
                summary=(
                    f"{ratio:.1f} % of idle GPU ({ix.frag_milli / MILLI_PER_GPU:.1f} of "
                    f"{idle_gpus:.1f} GPUs) is fragment for the typical pods"
                ),
                evidence={
                    "frag_ratio_pct": round(ratio, 4),
                    "frag_amount_pct": round(ix.frag_amount_pct, 4),
                    "idle_gpus": idle_gpus,
                    "frag_gpus": round(ix.frag_milli / MILLI_PER_GPU, 4),
                    "typical_pods": len(self._typical),
                },
            )
        return []

    # --- pending pods and gangs ---------------------------------------------------------------

    def _evaluate_pending(self, at: datetime) -> list[Signal]:
        self._changed = False
        self._evaluated_at = at
        self.evaluations += 1
        out: list[Signal] = []
        self.explanations = {}
        gangs: defaultdict[tuple[str, str], list[TaskProfile]] = defaultdict(list)
        for key in sorted(self.pending):
            task = self.tasks[key]
            if task.gang is not None:
                gangs[(key.split("/", 1)[0], task.gang.name)].append(task)
                continue
            exp = explain_task(self.index, task, near_miss_nodes=self.settings.near_miss_nodes)
            self.explanations[key] = exp
        active: set[str] = set()
        for key, exp in self.explanations.items():
            if not exp.unplaceable:
                continue
            fp = fingerprint_of(SignalKind.UNPLACEABLE_PENDING, Scope.POD, key)
            active.add(fp)
            out += self._open(
                fp,
                kind=SignalKind.UNPLACEABLE_PENDING,
                scope=Scope.POD,
                scope_id=key,
                severity=Severity.WARNING,
                summary=self._pending_summary(key, exp),
                evidence={"request": self._request_evidence(self.tasks[key]), **exp.evidence()},
            )
        for (namespace, gang), members in sorted(gangs.items()):
            fp, gang_signals = self._gang_signal(namespace, gang, members)
            if gang_signals is not None:
                active.add(fp)
                out += gang_signals
        for fp, opened in list(self.open.items()):
            if opened.kind == SignalKind.UNPLACEABLE_PENDING and fp not in active:
                out += self._resolve(fp)
        return out

    def _gang_signal(
        self, namespace: str, gang: str, members: list[TaskProfile]
    ) -> tuple[str, list[Signal] | None]:
        scope_id = f"{namespace}/gang:{gang}"
        fp = fingerprint_of(SignalKind.UNPLACEABLE_PENDING, Scope.POD, scope_id)
        ref = members[0].gang
        assert ref is not None
        bound = sum(
            1
            for t in self.tasks.values()
            if t.gang is not None
            and t.gang.name == gang
            and t.key.startswith(f"{namespace}/")
            and t.node is not None
            and t.phase in (PodPhase.PENDING, PodPhase.RUNNING)
        )
        needed = ref.min_member - bound
        if needed <= 0 or needed > len(members):
            return fp, None  # already running, or waiting for members that do not exist yet
        check: GangCheck = check_gang(
            self.index, members, needed, near_miss_nodes=self.settings.near_miss_nodes
        )
        if not check.unplaceable:
            return fp, None
        evidence: dict[str, object] = {
            "gang": gang,
            "min_member": ref.min_member,
            "bound_members": bound,
            "pending_members": len(members),
            "placeable_together": check.placed,
            "needed": check.needed,
            "fits_cluster_total": check.fits_cluster_total,
        }
        if check.first_failure is not None:
            evidence["first_failure"] = check.first_failure.evidence()
        return fp, self._open(
            fp,
            kind=SignalKind.UNPLACEABLE_PENDING,
            scope=Scope.POD,
            scope_id=scope_id,
            severity=Severity.WARNING,
            summary=(
                f"gang {namespace}/{gang}: only {check.placed} of {check.needed} pending members "
                "fit together although the cluster has the capacity in total"
            ),
            evidence=evidence,
        )

    @staticmethod
    def _request_evidence(task: TaskProfile) -> dict[str, object]:
        r = task.requests
        return {
            "cpu_milli": r.cpu_milli,
            "memory_mib": r.memory_mib,
            "gpu_count": r.gpu_count,
            "gpu_milli": r.gpu_milli,
            "gpu_models": list(task.gpu_models),
        }

    @staticmethod
    def _pending_summary(key: str, exp: Explanation) -> str:
        top = ", ".join(f"{r.value} on {n} nodes" for r, n in exp.blocking[:3])
        return f"{key} fits the cluster's free total but no node: {top}"

    # --- signal bookkeeping ---------------------------------------------------------------------

    def _open(
        self,
        fp: str,
        *,
        kind: SignalKind,
        scope: Scope,
        scope_id: str,
        severity: Severity,
        summary: str,
        evidence: dict[str, object],
    ) -> list[Signal]:
        if fp in self.open:
            return []
        at = self.now
        if at is None:
            return []
        sig = Signal.model_validate(
            {
                "kind": kind,
                "scope": scope,
                "scope_id": scope_id,
                "severity": severity,
                "fingerprint": fp,
                "summary": summary,
                "evidence": evidence,
                "opened_at": at,
                "resolved_at": None,
                "state": "open",
            }
        )
        self.open[fp] = sig
        return [sig]

    def _resolve(self, fp: str) -> list[Signal]:
        sig = self.open.pop(fp, None)
        if sig is None or self.now is None:
            return []
        return [sig.resolved(max(self.now, sig.opened_at))]


def count_reasons(explanations: dict[str, Explanation]) -> Counter[str]:
    """Pending pods per blocking reason, over the unplaceable ones (for summaries)."""
    out: Counter[str] = Counter()
    for exp in explanations.values():
        if exp.unplaceable:
            for r, _ in exp.blocking:
                out[r.value] += 1
    return out
