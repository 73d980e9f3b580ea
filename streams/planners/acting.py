"""The acting step: the signals of an instant in, audit records and requests for the actuator
out, every plan through the gate.

It runs after the detectors in the cluster stage, on the same view, at the same event time,
so a replay and a live cluster plan alike. A plan is admitted whole or not at all (half a
reclaim makes room for nobody). What it lets through in enforce mode is handed on as requests;
everything else, refusals included, is recorded with its reason, so the trail shows what
gpufrag would have done and why it did not.
"""

from __future__ import annotations

import hashlib
import logging
from datetime import datetime, timedelta
from typing import NamedTuple

from pydantic import JsonValue

from models import Action, ActionMode, ActionOutcome, Signal
from models.actions import NoFix
from models.actuation import (
    QUARANTINE_TAINT,
    ActionRequest,
    CordonNode,
    EvictPod,
    TaintNode,
    UncordonNode,
    UntaintNode,
)
from models.settings import GuardrailSettings, PlannerSettings
from streams.cluster.view import ClusterView
from streams.guardrails.gate import Candidate, Gate
from streams.guardrails.gate_refusals import GateRefusal, RateLimited
from streams.planners import builtin  # noqa: F401  (its import registers the product's planners)
from streams.planners.candidates import HeldCache
from streams.planners.gate_preview import GatePreview, eviction_candidate
from streams.planners.no_fix import eviction_limit_spent
from streams.planners.plan import Plan, Planner, StatefulPlanner, SubjectPlanner
from streams.planners.planner_registry import PLANNERS, PlannerInputs
from streams.planners.rehearsal import Rehearsal

__all__ = ["Acting", "ActingOutput", "SignalsAt"]

log = logging.getLogger(__name__)
ActingOutput = Action | ActionRequest
LIFTS = frozenset({"uncordon", "untaint"})
RATE_LIMITED = RateLimited().code
NODE_OPS: dict[str, type[CordonNode] | type[TaintNode] | type[UncordonNode] | type[UntaintNode]] = {
    "cordon": CordonNode,
    "taint": TaintNode,
    "uncordon": UncordonNode,
    "untaint": UntaintNode,
}


class FollowUp(NamedTuple):
    """An enforced plan, waiting to be judged by whether its signal resolved."""

    due: datetime
    signal: str
    action_id: str
    kind: str

    def candidate(self, at: datetime) -> Candidate:
        return Candidate(action_id=self.action_id, kind=self.kind, at=at, signal=self.signal)

    def to_json(self) -> list[str]:
        return [self.due.isoformat(), self.signal, self.action_id, self.kind]

    @classmethod
    def from_json(cls, raw: list[str]) -> FollowUp:
        due, signal, action_id, kind = raw
        return cls(datetime.fromisoformat(due), signal, action_id, kind)


class SignalsAt(NamedTuple):
    """One evaluated instant, as ``Acting.apply`` takes it: its time, the signals that changed
    and the cluster view after them."""

    at: datetime
    signals: list[Signal]
    view: ClusterView


class Acting:
    """An operator in the sense of ``streams.operator``: ``apply`` takes one evaluated instant
    (``on_signals`` is the same call, unpacked); ``advance``, ``next_due`` and ``flush`` have
    nothing to do, since nothing in it falls due by time alone (the gate's windows and
    cooldowns are read when it is next asked) and every plan is decided at its instant.

    ``snapshot``/``restore`` differ from the contract: the state is one small JSON document
    (the gate's ledger, and each stateful planner's state under its name), handed out whole
    and stored by the hosts as one entry, not as changed entries in bytes, since it is a few
    kilobytes and changes only when an action is planned."""

    def __init__(self, *, planners: PlannerSettings, guardrails: GuardrailSettings) -> None:
        PLANNERS.check(planners.enabled)
        self.settings = planners
        self.guardrails = guardrails
        self.gate = Gate(guardrails)
        self.preview = GatePreview(self.gate)
        """The same gate, asked by the searching planners before they propose."""
        self.rehearsal = Rehearsal()
        """In dry-run, the plans admitted so far, counted as done in the planners' copy of
        the capacity for the pod cooldown, as enforce would have left the cluster (empty in
        enforce: there the view itself shows what was done)."""
        inputs = PlannerInputs(
            settings=planners,
            guardrails=guardrails,
            held=HeldCache(),
            preview=self.preview,
            rehearsal=self.rehearsal,
        )
        self.planners: dict[str, Planner] = {}
        """The enabled planners by name, in the order ``enabled`` lists them."""
        self.routes: dict[str, list[Planner]] = {}
        """Signal kind -> the planners asked about it, in that order."""
        eviction_only: dict[str, bool] = {}
        for name in dict.fromkeys(planners.enabled):
            entry = PLANNERS.get(name)
            planner = self.planners[name] = entry.build(inputs)
            for kind in sorted(entry.answers):
                self.routes.setdefault(kind, []).append(planner)
                eviction_only[kind] = eviction_only.get(kind, True) and entry.evicts_only
        self.spent_skips = frozenset(k for k, only in eviction_only.items() if only)
        """Kinds not planned for while the cluster-wide eviction limit is used up (see
        ``PlannerEntry.evicts_only``)."""
        self.unplanned = 0
        """Signals not planned for while the cluster-wide eviction limit was used up (no
        plan, so no action to refuse; the pod's ``no_fixes`` entry says so)."""
        self.held_back = 0
        """Plans searched with the eviction limits lifted, for the record (``_held_back``)."""
        self.errors = 0
        """Signals a planner failed on (logged; the signal itself is kept)."""
        self.no_fixes: dict[str, tuple[NoFix, ...]] = {}
        """The last ``on_signals`` instant's answers where no planner made a plan, by the
        signal's scope (the pending pod, or a gang's ``ns/gang:name``): each searching
        planner's reason, or the spent eviction limit. Read by the host right after the call
        and kept on that instant's explanations (``ClusterAnalysis.note_no_fixes``); not
        state."""
        self._now: datetime | None = None
        self.followups: list[FollowUp] = []
        """Enforced plans whose signal is not yet seen resolved, oldest first: the breaker's
        "no improvement" input (``_follow_up``)."""

    @property
    def on(self) -> bool:
        return self.guardrails.mode != "off"

    @property
    def now(self) -> datetime | None:
        return self._now

    def apply(self, item: SignalsAt) -> list[ActingOutput]:
        return self.on_signals(item.at, item.signals, item.view)

    def advance(self, event_time: datetime) -> list[ActingOutput]:
        if self._now is None or event_time > self._now:
            self._now = event_time
        return []

    def next_due(self) -> datetime | None:
        return None

    def flush(self) -> list[ActingOutput]:
        return []

    def on_signals(
        self, at: datetime, signals: list[Signal], view: ClusterView
    ) -> list[ActingOutput]:
        self.advance(at)
        if not self.on:
            return []
        self.preview.move_to(at)
        self.rehearsal.forget_before(at)
        self._follow_up(at, signals)
        self.no_fixes = {}
        out: list[ActingOutput] = []
        for signal in signals:
            try:
                plan = self._plan(signal, view, at)
            except Exception:  # a planner's bug must not take the instant's signals with it
                self.errors += 1
                log.exception("planning for signal %s failed", signal.fingerprint)
                continue
            if plan is not None:
                out += self._decide(plan, at, view)
        return out

    def _plan(self, signal: Signal, view: ClusterView, at: datetime) -> Plan | None:
        route = self.routes.get(signal.kind)
        if not route:
            return None
        if signal.kind in self.spent_skips and self.gate.evictions_left(at) == 0:
            # every plan for it evicts, and the cluster's limit would refuse it: a search
            # (tens of ms on a thousand nodes) for a certain refusal is not made
            key = _subject(route[0], signal, view)
            if key is None:  # nobody it would plan for (a namespace's quota signal)
                return None
            self.unplanned += 1
            if signal.state == "open":
                g = self.guardrails
                spent = eviction_limit_spent(limit=g.max_evictions_cluster, window_s=g.window_s)
                self._no_fix(key, (spent,))
            return None
        reasons: dict[str | None, list[NoFix]] = {}
        for planner in route:
            answer = planner.plan(signal, view)
            if isinstance(answer, NoFix):
                reasons.setdefault(_subject(planner, signal, view), []).append(answer)
            elif answer is not None:
                return answer
        for key, found in reasons.items():
            self._no_fix(key, tuple(found))
        if any(r.code == RATE_LIMITED for found in reasons.values() for r in found):
            return self._held_back(signal, view, route, subjects=set(reasons))
        return None

    def _no_fix(self, key: str | None, reasons: tuple[NoFix, ...]) -> None:
        """Keep ``reasons`` for ``key``'s explanation, beside those another signal of the
        same instant gave it (a pod both unplaceable and held by its queue)."""
        if key is not None:
            self.no_fixes[key] = self.no_fixes.get(key, ()) + reasons

    def _held_back(
        self,
        signal: Signal,
        view: ClusterView,
        route: list[Planner],
        *,
        subjects: set[str | None],
    ) -> Plan | None:
        """The plan an eviction limit holds back: searched again with the limits lifted, it
        goes to the gate, which refuses it for the limit, and is recorded with its proof, so
        `gpufrag explain` shows the fix beside the guardrail that stops it (planning is free,
        acting is what the guardrails govern). Only where a limit stopped every plan, so the
        refusals it adds measure a limit, never a planner's blind spot; a used-up cluster-wide
        limit is still not searched for (above), since it holds back every plan alike."""
        with self.preview.rates_lifted():
            for planner in route:
                answer = planner.plan(signal, view)
                if isinstance(answer, Plan):
                    self.held_back += 1
                    # the refused plan names the limit itself, beside the fix it holds back
                    for key in subjects:
                        self.no_fixes.pop(key or "", None)
                    return answer
        return None

    def _decide(self, plan: Plan, at: datetime, view: ClusterView) -> list[ActingOutput]:
        plan_id = _plan_id(plan, at)
        requests = _requests(plan, plan_id)
        asked = ActionMode.ENFORCE if self.guardrails.mode == "enforce" else ActionMode.DRY_RUN
        if set(plan.node_ops) <= LIFTS and plan.node_ops:
            # lifting our own quarantine makes the cluster safer: no limit holds it back
            out = self._records(plan, requests, [asked] * len(requests), None, at)
            if asked is ActionMode.ENFORCE:
                out += [r.model_copy(update={"mode": ActionMode.ENFORCE}) for r in requests]
            return out
        # one candidate per eviction; a node's cordon and taint are one quarantine to the gate
        cands = [_candidate(plan, r, at) for r in requests if isinstance(r, EvictPod)]
        if plan.node_ops:
            cands.append(_candidate(plan, requests[-1], at))
        decisions, refused = self.gate.admit_all(cands)
        if refused is not None:
            return self._records(plan, requests, [asked] * len(requests), refused, at)
        mode = ActionMode.ENFORCE
        if any(d.mode is not ActionMode.ENFORCE for d in decisions):
            mode = ActionMode.DRY_RUN  # dry-run, or enforce held back by the open breaker
        if self.guardrails.mode == "dry-run":
            # as done, for the window in which the gate would refuse its victims anyway
            span = self.guardrails.cooldown_pod_s
            self.rehearsal.record(plan, view, at=at, span_s=span)
        out = self._records(plan, requests, [mode] * len(requests), None, at)
        if mode is ActionMode.ENFORCE:
            out += [r.model_copy(update={"mode": ActionMode.ENFORCE}) for r in requests]
            # judged later by its signal; a plan that only fences a node (a quarantine) is
            # not: it keeps a faulty card from new work, it does not fix the card's signal
            evictions = [r for r in requests if isinstance(r, EvictPod)]
            if evictions:
                due = at + timedelta(seconds=self.guardrails.breaker_settle_s)
                signal = plan.signal.fingerprint
                self.followups.append(FollowUp(due, signal, evictions[0].id, plan.kind))
        return out

    def _follow_up(self, at: datetime, signals: list[Signal]) -> None:
        """Tell the gate how the enforced plans went, for its circuit breaker: a plan whose
        signal resolved helped (it clears the signal's count); one whose signal is still open
        ``breaker_settle_s`` after it did not, and ``breaker_no_improvement`` of those for one
        signal open the breaker. Whether the actuator carried it out is the actuator's own
        breaker's to count (``streams/app/sinks/actuator_breaker.py``)."""
        if not self.followups:
            return
        resolved = {s.fingerprint for s in signals if s.state != "open"}
        kept: list[FollowUp] = []
        for f in self.followups:
            seen_resolved = f.signal in resolved
            if f.due < at or (f.due == at and not seen_resolved):
                # still open at its due time (a resolution seen now came after it)
                self.gate.outcome(f.candidate(at), ok=True, at=at, signal_open=True)
            elif not seen_resolved:
                kept.append(f)
                continue
            if seen_resolved:  # resolved: the signal's count starts again
                self.gate.outcome(f.candidate(at), ok=True, at=at, signal_open=False)
        self.followups = kept

    def _records(
        self,
        plan: Plan,
        requests: list[ActionRequest],
        modes: list[ActionMode],
        refused: GateRefusal | None,
        at: datetime,
    ) -> list[ActingOutput]:
        out: list[ActingOutput] = []
        for request, mode in zip(requests, modes, strict=True):
            evidence: dict[str, JsonValue] = dict(request.evidence)
            if refused is not None:
                evidence["refused"] = refused.text()
                # the limit's name, one of a few (gate_refusals.py): what metrics count by
                evidence["refused_rule"] = refused.code
            out.append(
                Action(
                    id=request.id,
                    kind=plan.kind,
                    mode=mode,
                    outcome=ActionOutcome.REFUSED if refused else ActionOutcome.PROPOSED,
                    target_scope=request.target_scope,
                    target=request.target,
                    signal_fingerprint=plan.signal.fingerprint,
                    reason=plan.reason,
                    evidence=evidence,
                    created_at=at,
                )
            )
        return out

    def snapshot(self) -> dict[str, object]:
        """The whole state: ``gate``, ``rehearsal`` (a dry run's admitted plans, while any
        is in its window), and each stateful planner's under its name."""
        out: dict[str, object] = {"gate": self.gate.snapshot()}
        if self.followups:
            out["followups"] = [f.to_json() for f in self.followups]
        if self.rehearsal.entries:
            out["rehearsal"] = self.rehearsal.to_json()
        for name, planner in self.planners.items():
            if isinstance(planner, StatefulPlanner):
                out[name] = planner.snapshot()
        return out

    def restore(self, raw: dict[str, object]) -> None:
        gate = raw.get("gate")
        if isinstance(gate, dict):
            self.gate.restore(gate)
        self.rehearsal.restore(raw.get("rehearsal", []))
        followups = raw.get("followups")
        kept = followups if isinstance(followups, list) else []
        self.followups = [FollowUp.from_json(f) for f in kept if isinstance(f, list)]
        for name, planner in self.planners.items():
            if isinstance(planner, StatefulPlanner) and name in raw:
                planner.restore(raw[name])


def _subject(planner: Planner, signal: Signal, view: ClusterView) -> str | None:
    """The explanation a planner's answer on ``signal`` is about: its pod, or the signal's
    scope (a pod's or a gang's ``unplaceable_pending``)."""
    if isinstance(planner, SubjectPlanner):
        return planner.subject(signal, view)
    return signal.scope_id


def _plan_id(plan: Plan, at: datetime) -> str:
    """Stable for the same plan at the same event time, so a replayed or re-delivered instant
    asks the actuator for the same ids and it acts once."""
    h = hashlib.sha256()
    h.update(f"{plan.kind}|{plan.signal.fingerprint}|{at.isoformat()}|".encode())
    h.update("|".join(t.key for t in plan.evictions).encode())
    h.update("|".join(plan.node_ops).encode())
    return f"{plan.kind}-{h.hexdigest()[:16]}"


def _requests(plan: Plan, plan_id: str) -> list[ActionRequest]:
    common: dict[str, object] = {
        "kind": plan.kind,
        "signal_fingerprint": plan.signal.fingerprint,
        "reason": plan.reason,
        "evidence": {**plan.evidence, "plan": plan_id},
    }
    out: list[ActionRequest] = []
    for n, task in enumerate(plan.evictions):
        namespace, name = task.key.split("/", 1)
        out.append(
            EvictPod.model_validate(
                {
                    **common,
                    "id": f"{plan_id}-{n}",
                    "namespace": namespace,
                    "name": name,
                    "uid": task.uid or None,
                }
            )
        )
    for op in plan.node_ops:
        fields = {**common, "id": f"{plan_id}-{op}", "node": plan.node}
        if op in ("taint", "untaint"):
            fields["key"] = QUARANTINE_TAINT
        out.append(NODE_OPS[op].model_validate(fields))
    return out


def _candidate(plan: Plan, request: ActionRequest, at: datetime) -> Candidate:
    if isinstance(request, EvictPod):
        task = next(t for t in plan.evictions if t.key == request.target)
        return eviction_candidate(
            task,
            action_id=request.id,
            kind=plan.kind,
            at=at,
            beneficiary_priority=plan.beneficiary_priority,
            signal=plan.signal.fingerprint,
        )
    return Candidate(
        action_id=request.id,
        kind=plan.kind,
        at=at,
        node=plan.node,
        signal=plan.signal.fingerprint,
    )
