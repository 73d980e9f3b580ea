"""Unplaceable pending pods and gangs: they fit the cluster's free total but no node (or no set
of nodes), with the blocking reasons per node and the nodes closest to fitting.

Each evaluation checks every pending pod against every node, so it runs at most every
``evaluate_every_s`` of event time and only when something changed; a pod that is bound or
gone is resolved at once, so the resolution carries the time it happened.

Where kube-scheduler gave its own verdict on a pod (FailedScheduling, kept in the pod's
profile), the explanation carries both, and each verdict that disagrees is counted once: by
the first evaluation after it arrived. That needs no state per pod, only the time of the
previous evaluation; a verdict older than that (late input) is shown but not counted. Gang
members are checked together, not one by one, and are not compared. A gang waiting for room
(fewer of its members bound than its ``minMember``, the rest pending) has one explanation of
its own, keyed ``namespace/gang:NAME``, beside its members' keys, which have none.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime, timedelta

from models import PodPhase, Scope, Severity, Signal, SignalKind, TaskProfile
from models.actions import NoFix
from models.analysis import BlockReason, Explanation, GangFigures
from models.scheduler import PendingVerdict
from models.settings import UnplaceablePendingSettings
from streams.cluster.book import SignalBook
from streams.cluster.queues import QueueView, queue_view
from streams.cluster.view import ClusterView, TaskChange
from streams.detectors.detector import Detector
from streams.fragmentation.pending import GangCheck, check_gang, explain_task, gang_order
from streams.fragmentation.verdicts import check_verdict


class UnplaceablePending(Detector[UnplaceablePendingSettings]):
    name = "unplaceable_pending"

    def explainer(self) -> UnplaceablePending:
        return self

    def __init__(
        self, view: ClusterView, book: SignalBook, settings: UnplaceablePendingSettings
    ) -> None:
        super().__init__(view, book, settings)
        self.explanations: dict[str, Explanation] = {}
        self.changed = False
        self.evaluated_at: datetime | None = None
        self.evaluations = 0
        """Pending-queue evaluations so far; hosts keep explanations when it moves."""
        self.joined: dict[str, tuple[Explanation, TaskProfile]] = {}
        """Explanations a scheduler verdict joined since the last report (``take_joined``),
        with the pod as it was then: the pod may be gone by the instant's end."""
        self._joined_since: dict[str, PendingVerdict] = {}
        """The verdict joined (and counted) per pod since the last evaluation, so that the
        evaluation does not count the same verdict again."""
        self.disagreements: Counter[str] = Counter()
        """Scheduler verdicts that disagreed with gpufrag's explanation, by the scheduler's
        reason, since this operator was built: a host's metric, not state (a restored
        operator starts again at zero, and hosts count what it adds)."""
        self._evaluated_version = -1
        """The capacity index's version at the last evaluation (not state: a restored
        operator counts any node change as a change)."""
        self._tally: Counter[tuple[str, ...]] | None = None
        """``figures`` as last counted; None: an evaluation or the pending set changed since.
        Counted per report, the pass over 2,000 explanations was 6.8 of 9.2 s for 1,000
        events of the ingest bench at 10,000 nodes; a GPU sample changes neither. A joined
        verdict or a planner's no-fix reasons change neither ``unplaceable`` nor the blocking
        reasons it counts: recounting after each of the ingest load's FailedScheduling events
        (one in 20) was 0.52 of 4.3 s (cProfile, 5,000 events at 10,000 nodes)."""

    # --- hooks ---------------------------------------------------------------------------------

    def on_node(self, name: str) -> list[Signal]:
        # an explanation reads the capacity index alone: a node change that left every row
        # as it was (a GPU sample, most of a live cluster's node changes) changes none
        if self.view.index.version != self._evaluated_version:
            self.changed = True
        return []

    def on_task(self, key: str, change: TaskChange) -> list[Signal]:
        if change.pending_changed:
            self._tally = None
        if change.pending_changed or change.verdict_changed:
            self.changed = True
        if change.verdict_changed:
            self._join(key)
        if not change.left_pending:
            return []
        self.explanations.pop(key, None)
        return self.book.resolved(SignalKind.UNPLACEABLE_PENDING, Scope.POD, key)

    def on_queue(self, key: str) -> list[Signal]:
        self.changed = True
        return []

    def on_typical(self) -> list[Signal]:
        self.changed = True
        return []

    def advance(self, at: datetime) -> list[Signal]:
        if self.changed and (
            self.evaluated_at is None
            or (at - self.evaluated_at).total_seconds() >= self.settings.evaluate_every_s
        ):
            return self._evaluate(at)
        return []

    def next_due(self) -> datetime | None:
        if self.changed and self.evaluated_at is not None:
            return self.evaluated_at + timedelta(seconds=self.settings.evaluate_every_s)
        return None

    def flush(self) -> list[Signal]:
        now = self.view.now
        return self._evaluate(now) if self.changed and now is not None else []

    def counts(self) -> Mapping[str, int]:
        return {"unplaceable_pods": sum(self._counted().values())}

    def figures(self) -> Mapping[tuple[str, ...], float]:
        """Each unplaceable pending pod under its most common blocking reason (the pods
        ``counts`` counts, so the reasons add up to ``unplaceable_pods``)."""
        return Counter(self._counted())

    def _counted(self) -> Counter[tuple[str, ...]]:
        if self._tally is None:
            pending = self.view.pending
            out: Counter[tuple[str, ...]] = Counter()
            for k, e in self.explanations.items():
                if e.unplaceable and k in pending:
                    out[("unplaceable", e.blocking[0][0].value if e.blocking else "none")] += 1
            self._tally = out
        return self._tally

    def rebuilt(self) -> None:
        self._tally = None

    def clock_state(self) -> dict[str, object]:
        at = self.evaluated_at
        return {
            "evaluated_at": None if at is None else at.isoformat(),
            "changed": self.changed,
            "evaluations": self.evaluations,
        }

    def restore_clock(self, state: dict[str, object]) -> None:
        at = state["evaluated_at"]
        self.evaluated_at = None if at is None else datetime.fromisoformat(str(at))
        self.changed = bool(state["changed"])
        self.evaluations = int(str(state["evaluations"]))

    # --- evaluation ----------------------------------------------------------------------------

    def _evaluate(self, at: datetime) -> list[Signal]:
        since = self.evaluated_at
        self.changed = False
        self.evaluated_at = at
        self.evaluations += 1
        view = self.view
        self._evaluated_version = view.index.version
        self.explanations = {}
        self._tally = None
        quotas = queue_view(view.queues, view.tally) if view.queues else None
        gangs: defaultdict[tuple[str, str], list[TaskProfile]] = defaultdict(list)
        for key in sorted(view.pending):
            task = view.tasks[key]
            if task.gang is not None:
                gangs[(key.split("/", 1)[0], task.gang.name)].append(task)
                continue
            exp = explain_task(view.index, task, near_miss_nodes=self.settings.near_miss_nodes)
            if task.scheduler is not None:
                exp = self._beside(exp, task.scheduler, since, key=key)
            if quotas is not None:
                exp = _with_quota(exp, quotas, task)
            self.explanations[key] = replace(exp, evaluated_at=at)
        self._joined_since.clear()
        out: list[Signal] = []
        active: set[str] = set()
        for key, exp in self.explanations.items():
            if exp.unplaceable:
                active.add(key)
                out += self._open_pod(key, exp)
        for (namespace, gang), members in sorted(gangs.items()):
            scope_id, gang_exp, signals = self._gang(namespace, gang, members, quotas)
            if gang_exp is not None:
                self.explanations[scope_id] = replace(gang_exp, evaluated_at=at)
            if signals is not None:
                active.add(scope_id)
                out += signals
        for opened in list(self.book.open.values()):
            if opened.kind == SignalKind.UNPLACEABLE_PENDING and opened.scope_id not in active:
                out += self.book.resolve_fingerprint(opened.fingerprint)
        return out

    def note_no_fixes(self, no_fixes: Mapping[str, tuple[NoFix, ...]]) -> None:
        """The planners' reasons for finding no fix, on the explanations they were found for
        (a pod's key, or a gang's scope, as its explanation is keyed); kept for the rest of
        the evaluation so a late verdict's row keeps them."""
        for key, reasons in no_fixes.items():
            exp = self.explanations.get(key)
            if exp is not None:
                self.explanations[key] = replace(exp, no_fix=reasons)

    def take_joined(self) -> dict[str, tuple[Explanation, TaskProfile]]:
        """The explanations completed by a late verdict since the last call, for the host's
        report on this instant (each replaces its evaluation's stored row)."""
        joined, self.joined = self.joined, {}
        return joined

    def _join(self, key: str) -> None:
        """A verdict that comes after the pod's evaluation, set beside that explanation.

        kube-scheduler writes FailedScheduling after its attempt, and a pod is explained when
        it is seen pending: under the FGD protocol the verdict comes half a second later, in
        the instant the pod is dropped, so before this join 0 of the 10,823 explanations a
        replay stored carried it. Joined here, it reaches the row the evaluation stored."""
        exp = self.explanations.get(key)
        task = self.view.tasks.get(key)
        if exp is None or task is None or task.scheduler is None or exp.evaluated_at is None:
            return
        if exp.scheduler is not None and exp.scheduler.verdict == task.scheduler:
            return
        joined = self._beside(exp, task.scheduler, exp.evaluated_at, key=key)
        self.explanations[key] = joined  # the tally stays: verdicts leave what it counts
        self.joined[key] = (joined, task)
        self._joined_since[key] = task.scheduler

    def _beside(
        self, exp: Explanation, verdict: PendingVerdict, since: datetime | None, *, key: str = ""
    ) -> Explanation:
        """The explanation with the scheduler's verdict set beside it; a disagreement is
        counted when the verdict is new since the previous evaluation and was not counted
        when it was joined."""
        check = check_verdict(exp, verdict)
        counted = self._joined_since.get(key)
        fresh = (since is None or verdict.at > since) and verdict != counted
        if check.agrees is False and check.reason is not None and fresh:
            self.disagreements[check.reason.value] += 1
        return replace(exp, scheduler=check)

    def _open_pod(self, key: str, exp: Explanation) -> list[Signal]:
        task = self.view.tasks[key]
        top = ", ".join(f"{r.value} on {n} nodes" for r, n in exp.blocking[:3])
        return self.book.opened(
            SignalKind.UNPLACEABLE_PENDING,
            Scope.POD,
            key,
            severity=Severity.WARNING,
            summary=f"{key} fits the cluster's free total but no node: {top}",
            evidence={"request": _request_evidence(task), **exp.evidence()},
        )

    def _gang(
        self,
        namespace: str,
        gang: str,
        members: list[TaskProfile],
        quotas: QueueView | None,
    ) -> tuple[str, Explanation | None, list[Signal] | None]:
        """The gang's explanation while it waits for room, and its signal when it is
        unplaceable (the needed members fit the free total, not together)."""
        scope_id = f"{namespace}/gang:{gang}"
        ref = members[0].gang
        assert ref is not None
        bound = sum(
            1
            for t in self.view.tasks.values()
            if t.gang is not None
            and t.gang.name == gang
            and t.key.startswith(f"{namespace}/")
            and t.node is not None
            and t.phase in (PodPhase.PENDING, PodPhase.RUNNING)
        )
        needed = ref.min_member - bound
        if needed <= 0 or needed > len(members):
            return scope_id, None, None  # already running, or waiting for members not there yet
        check = check_gang(
            self.view.index, members, needed, near_miss_nodes=self.settings.near_miss_nodes
        )
        exp = self._gang_explanation(check, members, ref.min_member, bound, quotas)
        if not check.unplaceable:
            return scope_id, exp, None
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
        signals = self.book.opened(
            SignalKind.UNPLACEABLE_PENDING,
            Scope.POD,
            scope_id,
            severity=Severity.WARNING,
            summary=(
                f"gang {namespace}/{gang}: only {check.placed} of {check.needed} pending members "
                "fit together although the cluster has the capacity in total"
            ),
            evidence=evidence,
        )
        return scope_id, exp, signals

    def _gang_explanation(
        self,
        check: GangCheck,
        members: list[TaskProfile],
        min_member: int,
        bound: int,
        quotas: QueueView | None,
    ) -> Explanation:
        """The gang as one explanation: its figures, whether the needed members fit
        together, and the reasons of one member checked alone (the first that found no
        room, else the largest), whose request the stored row shows."""
        shown = next((t for t in members if t.key == check.failed), gang_order(members)[0])
        alone = check.first_failure or explain_task(
            self.view.index, shown, near_miss_nodes=self.settings.near_miss_nodes
        )
        assert shown.gang is not None
        figures = GangFigures(
            name=shown.gang.name,
            min_member=min_member,
            bound=bound,
            members=tuple(sorted(t.key for t in members)),
            placeable_together=check.placed,
            needed=check.needed,
            shown=shown.key,
        )
        exp = replace(
            alone,
            fits_cluster_total=check.fits_cluster_total,
            fits_some_node=check.placed >= check.needed,
            gang=figures,
        )
        if quotas is None:
            return exp
        # one member's request: a queue with no room for one has none for the gang (one with
        # room for one member but not for all is not named)
        return _with_quota(exp, quotas, shown)


def _with_quota(exp: Explanation, quotas: QueueView, task: TaskProfile) -> Explanation:
    """A quota with no room blocks the pod on every node, whatever the nodes have free."""
    blocks = quotas.blocks(task)
    if not blocks:
        return exp
    return replace(
        exp,
        quota=tuple(b.key for b in blocks),
        quota_blocks=blocks,
        blocking=((BlockReason.QUOTA, exp.nodes_checked), *exp.blocking),
    )


def _request_evidence(task: TaskProfile) -> dict[str, object]:
    r = task.requests
    return {
        "cpu_milli": r.cpu_milli,
        "memory_mib": r.memory_mib,
        "gpu_count": r.gpu_count,
        "gpu_milli": r.gpu_milli,
        "gpu_models": list(task.gpu_models),
    }
