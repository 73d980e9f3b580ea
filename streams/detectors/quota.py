"""Quotas and queues: GPU work that waits on quota rather than on nodes.

Three findings, each per GPU resource, from the queue view (``queues.py``):

- ``quota_borrowable`` (a queue): its pending work needs more than its own unused quota, and
  other queues of its cohort leave theirs idle, so borrowing could run it; the evidence says
  how much its borrowing limit allows (Kueue borrows on its own within the limit, so a signal
  that stays open points at the limit or at a flavor mismatch);
- ``quota_lender_blocked`` (a queue): it has pending work and unused guaranteed quota, but the
  cohort has none free because others borrowed it, so the work waits for reclaim;
- ``quota_exhausted`` (a namespace): a GPU ResourceQuota is used up while GPU work waits in the
  namespace, or it refused a controller's GPU pod (a FailedCreate "exceeded quota" Event on a
  Job, ReplicaSet, StatefulSet...: work that never became a pod); the refusal's summary names
  the owner and what it asked against what was used and limited (``quota_refusals.py`` says
  when a refusal is over). One signal per namespace: whichever finding comes first words it;
- ``quota_exhausted`` (a queue): a queue is full, its waiting work beyond what it may still take
  of its own accord (a Volcano queue at its capability, a Kueue ClusterQueue at its nominal
  quota without a cohort, or at nominal + borrowing limit), when neither borrowing finding
  applies: nothing in the cohort can help, only room in the queue or a larger quota. The kind
  is the namespace one's (a quota used up while work waits), the scope tells them apart, so
  the namespace signals keep their fingerprints.

The view changes only with quota objects and with pods that request GPUs; the findings are
re-derived at the end of an instant where either changed, from the ledgers alone, so a
restored view gives the same signals without a schedule of its own. Refusals are the
detector's own state (its clock state, so a restarted worker has them back), and their quiet
period its one schedule.
"""

from __future__ import annotations

from datetime import UTC, datetime

from models import SchedulerEvent, Scope, Severity, Signal, SignalKind
from models.settings import QuotaSettings
from streams.cluster.book import SignalBook
from streams.cluster.queues import EPSILON, QueueQuota, QueueView, queue_view
from streams.cluster.view import ClusterView, TaskChange
from streams.detectors.detector import Detector
from streams.detectors.quota_refusals import Refusals, RefusedOwner

KINDS = (
    SignalKind.QUOTA_BORROWABLE,
    SignalKind.QUOTA_LENDER_BLOCKED,
    SignalKind.QUOTA_EXHAUSTED,
)
Finding = tuple[SignalKind, Scope, str, str, dict[str, object]]
"""kind, scope, scope id, summary, evidence."""
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
"""The view's time before any event (never seen: a refusal comes with its event's time)."""


class QuotaDetector(Detector[QuotaSettings]):
    name = "quota"

    def __init__(self, view: ClusterView, book: SignalBook, settings: QuotaSettings) -> None:
        super().__init__(view, book, settings)
        self.changed = False
        self.refusals = Refusals(quiet_s=settings.refusal_quiet_s)

    def on_queue(self, key: str) -> list[Signal]:
        self.changed = True
        if key not in self.view.queues:  # deleted, or no longer limiting GPUs
            self.refusals.quota_gone(key)
        return []

    def on_refusal(self, event: SchedulerEvent, at: datetime) -> list[Signal]:
        if self.refusals.heard(event, at):
            self.changed = True
        return []

    def on_task(self, key: str, change: TaskChange) -> list[Signal]:
        if change.quota_changed and self.view.queues:
            self.changed = True
        return []

    def advance(self, at: datetime) -> list[Signal]:
        return self._evaluate() if self.changed or self.refusals.due(at) else []

    def flush(self) -> list[Signal]:
        return self._evaluate() if self.changed else []

    def next_due(self) -> datetime | None:
        return self.refusals.next_due()

    def clock_state(self) -> dict[str, object]:
        state = self.refusals.state()
        return {"refusals": state} if state else {}

    def restore_clock(self, state: dict[str, object]) -> None:
        self.refusals.restore(state.get("refusals"))

    def rebuilt(self) -> None:
        self.changed = True

    def _evaluate(self) -> list[Signal]:
        self.changed = False
        qv = queue_view(self.view.queues, self.view.tally)
        refused = self.refusals.live(self.view.now or _EPOCH, self.view.queues)
        findings = [*_queue_findings(qv), *_refusal_findings(refused), *_namespace_findings(qv)]
        out: list[Signal] = []
        active: set[tuple[SignalKind, str]] = set()
        for kind, scope, scope_id, summary, evidence in findings:
            if (kind, scope_id) in active:
                continue  # one signal per namespace: a refusal words it before the ledgers
            active.add((kind, scope_id))
            out += self.book.opened(
                kind,
                scope,
                scope_id,
                severity=Severity.WARNING,
                summary=summary,
                evidence=evidence,
            )
        for sig in sorted(self.book.open.values(), key=lambda s: s.fingerprint):
            if sig.kind in KINDS and (sig.kind, sig.scope_id) not in active:
                out += self.book.resolve_fingerprint(sig.fingerprint)
        return out


def _queue_findings(qv: QueueView) -> list[Finding]:
    out: list[Finding] = []
    for q in qv.queues.values():
        found: list[Finding] = []
        for finder in (_borrowable, _lender_blocked):
            for resource in sorted(q.pending):
                finding = finder(qv, q, resource)
                if finding is not None:
                    found.append(finding)
                    break  # one signal per queue and kind; the first resource names it
        if not found:  # borrowing, when it is the story, says more than "full"
            found = [f for r in sorted(q.pending) if (f := _full(q, r)) is not None][:1]
        out += found
    return out


def _borrowable(qv: QueueView, q: QueueQuota, resource: str) -> Finding | None:
    """Pending work beyond the queue's own idle quota, and idle quota elsewhere in its cohort."""
    pending, own = q.pending[resource], q.idle(resource)
    need = pending - own
    if q.cohort is None or need <= EPSILON:
        return None
    lenders = {
        m.key: m.idle(resource) for m in qv.cohort(q) if m.key != q.key and m.idle(resource) > 0
    }
    elsewhere = qv.cohort_free(q, resource) - own
    if elsewhere <= EPSILON or not lenders:
        return None
    used = q.used.get(resource, 0.0)
    may_borrow = max(0.0, q.limit[resource] - used) if resource in q.limit else None
    could = min(need, elsewhere)
    capped = may_borrow is not None and may_borrow < could - EPSILON
    why = f"; its borrowing limit allows {may_borrow:g}" if capped else ""
    return (
        SignalKind.QUOTA_BORROWABLE,
        Scope.QUEUE,
        q.key,
        f"{q.key} has {pending:g} {resource} pending beyond its quota while {elsewhere:g} "
        f"sit idle in cohort {q.cohort} ({', '.join(sorted(lenders))}){why}",
        {
            "resource": resource,
            "cohort": q.cohort,
            **q.evidence(),
            "cohort_idle": elsewhere,
            "lenders": lenders,
            "borrowable": could if may_borrow is None else min(could, may_borrow),
            "borrowing_limit_left": may_borrow,
        },
    )


def _lender_blocked(qv: QueueView, q: QueueQuota, resource: str) -> Finding | None:
    """Pending work within the queue's own unused quota that the cohort cannot give back,
    because others borrowed it."""
    pending, own = q.pending[resource], q.idle(resource)
    if q.cohort is None or own <= EPSILON:
        return None
    free = qv.cohort_free(q, resource)
    blocked = min(pending, own) - free
    borrowers = {
        m.key: m.borrowed[resource]
        for m in qv.cohort(q)
        if m.key != q.key and resource in m.borrowed
    }
    if blocked <= EPSILON or not borrowers:
        return None
    return (
        SignalKind.QUOTA_LENDER_BLOCKED,
        Scope.QUEUE,
        q.key,
        f"{q.key} has {pending:g} {resource} pending within its own unused quota ({own:g}), "
        f"lent to {', '.join(sorted(borrowers))} in cohort {q.cohort}",
        {
            "resource": resource,
            "cohort": q.cohort,
            **q.evidence(),
            "cohort_free": free,
            "blocked": blocked,
            "borrowers": borrowers,
        },
    )


def _full(q: QueueQuota, resource: str) -> Finding | None:
    """Waiting work beyond what the queue may still take of its own accord: a Volcano queue at
    its capability, a Kueue ClusterQueue at nominal + borrowing limit, or one without a cohort
    at its nominal quota. A queue that may borrow without a ceiling of its own is never full:
    its cohort decides, and the borrowing findings speak for it."""
    pending, ceiling = q.pending[resource], q.ceiling(resource)
    if ceiling is None or (resource not in q.guaranteed and resource not in q.limit):
        return None
    used = q.used.get(resource, 0.0)
    room = max(0.0, ceiling - used)
    if pending <= room + EPSILON:
        return None
    figures = _ceiling_words(q, resource, ceiling)
    return (
        SignalKind.QUOTA_EXHAUSTED,
        Scope.QUEUE,
        q.key,
        f"{q.key} has {pending:g} {resource} waiting and room for {room:g}: "
        f"{used:g} of {ceiling:g} used ({figures})",
        {
            "resource": resource,
            "cohort": q.cohort,
            **q.evidence(),
            "ceiling": ceiling,
            "room": room,
        },
    )


def _ceiling_words(q: QueueQuota, resource: str, ceiling: float) -> str:
    """The ceiling in the queue's own terms: capability, nominal quota and borrowing limit."""
    nominal = q.guaranteed.get(resource, 0.0)
    if q.key.startswith("VolcanoQueue:"):
        return f"deserved {nominal:g}, capability {ceiling:g}"
    if q.cohort is None:
        return f"nominal quota {nominal:g}, no cohort to borrow from"
    return f"nominal quota {nominal:g}, borrowing limit {ceiling - nominal:g}"


def _namespace_findings(qv: QueueView) -> list[Finding]:
    out: list[Finding] = []
    for namespace, quotas in sorted(qv.quotas.items()):
        exhausted = {
            q.key: sorted(
                r
                for r, hard in q.limit.items()
                if q.pending.get(r, 0.0) > EPSILON and q.used.get(r, 0.0) >= hard - EPSILON
            )
            for q in quotas
        }
        exhausted = {k: rs for k, rs in exhausted.items() if rs}
        if not exhausted:
            continue
        first = next(q for q in quotas if q.key in exhausted)
        resource = exhausted[first.key][0]
        out.append(
            (
                SignalKind.QUOTA_EXHAUSTED,
                Scope.NAMESPACE,
                namespace,
                f"namespace {namespace}: {first.key} has all {first.limit[resource]:g} "
                f"{resource} in use while {first.pending[resource]:g} more wait",
                {
                    "quotas": {q.key: q.evidence() for q in quotas if q.key in exhausted},
                    "exhausted": exhausted,
                },
            )
        )
    return out


def _refusal_findings(refused: list[RefusedOwner]) -> list[Finding]:
    """One finding per namespace whose quota refused a GPU pod, worded by its first refused
    owner; every live refusal of the namespace in its evidence."""
    by_ns: dict[str, list[RefusedOwner]] = {}
    for r in refused:
        by_ns.setdefault(r.namespace, []).append(r)
    out: list[Finding] = []
    for namespace, rs in sorted(by_ns.items()):
        first = rs[0]
        more = f" (and {len(rs) - 1} more owners)" if len(rs) > 1 else ""
        out.append(
            (
                SignalKind.QUOTA_EXHAUSTED,
                Scope.NAMESPACE,
                namespace,
                f"namespace {namespace}: {first.quota_key} refused {first.owner}'s pod: "
                f"{first.words()}{more}",
                {
                    "reason": "refused",
                    "owner": first.owner,
                    "refused": {r.owner: r.evidence() for r in rs},
                },
            )
        )
    return out
