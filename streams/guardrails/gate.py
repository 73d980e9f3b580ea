"""The gate every proposed action passes: the mode, then one small filter per limit, each
refusing with its own type (``refusals.py``), then the circuit breaker, which may only hold an
action back to a proposal, never let one through.

``admit`` decides and, for what it lets through, takes the slot at once (the eviction counts in
its windows, the pod, node and job start cooling down), so two proposals at one instant cannot
both take the last slot. In dry-run the same accounting runs: the trail then shows what enforce
would have done, limits included. ``outcome`` reports how an action carried out went, which is
what the breaker watches: failures, or a signal that stays open after actions for it.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from models import ActionMode
from models.actions import ActionKindName
from models.settings import GuardrailSettings
from streams.guardrails.gate_refusals import (
    BreakerOpen,
    CoolingDown,
    ExemptPod,
    GateRefusal,
    ModeOff,
    PriorityGapTooSmall,
    ProtectedNamespace,
    RateLimited,
)
from streams.guardrails.ledger import Eviction, Ledger

__all__ = ["Candidate", "Decision", "Gate", "never_evicted"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Candidate:
    """One proposed action with the facts the filters need. It evicts when it names a pod
    (a consolidation moves one by evicting it); without a pod it changes its node (a cordon,
    a taint). The filters go by that, not by the kind, so an extension's planner is held to
    the same limits without registering its kind anywhere."""

    action_id: str
    kind: ActionKindName
    at: datetime
    pod: str | None = None
    """"namespace/name" of the pod it evicts."""
    node: str | None = None
    job: str | None = None
    """The pod's job or gang, cooled down as a whole."""
    labels: Mapping[str, str] = field(default_factory=dict)
    priority: int | None = None
    beneficiary_priority: int | None = None
    """Priority of the pod or gang the eviction makes room for (None: nobody's, e.g. an OOM
    storm's aggressor)."""
    signal: str | None = None

    @property
    def evicts(self) -> bool:
        return self.pod is not None

    @property
    def namespace(self) -> str | None:
        return None if self.pod is None else self.pod.split("/", 1)[0]


@dataclass(frozen=True, slots=True)
class Decision:
    mode: ActionMode | None
    """How the action may go ahead; None: it may not."""
    refused: GateRefusal | None = None
    held_back: BreakerOpen | None = None
    """Enforce was asked, the breaker is open: a proposal only."""

    @property
    def allowed(self) -> bool:
        return self.mode is not None


Filter = Callable[[GuardrailSettings, Ledger, Candidate], GateRefusal | None]


def never_evicted(
    s: GuardrailSettings, *, pod: str, labels: Mapping[str, str]
) -> ProtectedNamespace | ExemptPod | None:
    """Why the pod ``pod`` ("namespace/name") may never be evicted, whatever the plan: its
    namespace is protected, or it carries the exempt label (any value but "false"). The one
    judgement of both: the gate's filter below, and the planners, which leave such pods out
    of their searches rather than build plans the gate would refuse."""
    namespace = pod.split("/", 1)[0]
    if namespace in s.protected_namespaces:
        return ProtectedNamespace(namespace=namespace)
    if labels.get(s.exempt_label) not in (None, "false"):
        return ExemptPod(label=s.exempt_label)
    return None


def untouchable(s: GuardrailSettings, _: Ledger, c: Candidate) -> GateRefusal | None:
    return None if c.pod is None else never_evicted(s, pod=c.pod, labels=c.labels)


def priority_gap(s: GuardrailSettings, _: Ledger, c: Candidate) -> GateRefusal | None:
    if not c.evicts or c.beneficiary_priority is None:
        return None
    victim = c.priority or 0
    if c.beneficiary_priority - victim >= s.min_priority_gap:
        return None
    return PriorityGapTooSmall(
        victim=victim, beneficiary=c.beneficiary_priority, needed=s.min_priority_gap
    )


def cooling(_: GuardrailSettings, led: Ledger, c: Candidate) -> GateRefusal | None:
    for scope in _cooldown_keys(c):
        until = led.cooldowns.get(scope)
        if until is not None and until > c.at:
            return CoolingDown(scope=scope, until=until)
    return None


def rate(s: GuardrailSettings, led: Ledger, c: Candidate) -> GateRefusal | None:
    if not c.evicts:
        return None
    limits = [("cluster", s.max_evictions_cluster, led.count())]
    if c.node is not None:
        limits.append((f"node:{c.node}", s.max_evictions_node, led.count(node=c.node)))
    if c.namespace is not None:
        n = led.count(namespace=c.namespace)
        limits.append((f"namespace:{c.namespace}", s.max_evictions_namespace, n))
    for scope, limit, used in limits:
        if used >= limit:
            return RateLimited(scope=scope, limit=limit, window_s=s.window_s)
    return None


FILTERS: tuple[Filter, ...] = (untouchable, priority_gap, cooling, rate)


def _cooldown_keys(c: Candidate) -> list[str]:
    """What an action cools down: an eviction its pod and job (not its node: the node limit
    counts those), a node change (a quarantine) its node."""
    if not c.evicts:
        return [] if c.node is None else [f"node:{c.node}"]
    keys = []
    if c.pod is not None:
        keys.append(f"pod:{c.pod}")
    if c.job is not None:
        keys.append(f"job:{c.job}")
    return keys


class Gate:
    def __init__(self, settings: GuardrailSettings) -> None:
        self.settings = settings
        self.ledger = Ledger(window_s=settings.window_s)

    def check(self, c: Candidate) -> GateRefusal | None:
        """Whether ``c`` would be refused, taking nothing: a plan of several evictions asks
        for all of them first, since half a plan makes room for nobody."""
        self.ledger.forget_before(c.at)
        return self.refusal(c)

    def refusal(self, c: Candidate) -> GateRefusal | None:
        """``check`` without first dropping what expired: for the many questions a planner
        asks at one instant (a search weighs up to 64 nodes x 16 pods, 1,024 of them), after
        one ``ledger.forget_before`` at that instant. Expired entries never refuse, so the
        answer is the same; only the scan of every cooldown per question is saved."""
        s, led = self.settings, self.ledger
        if s.mode == "off":
            return ModeOff()
        for check in FILTERS:
            refused = check(s, led, c)
            if refused is not None:
                return refused
        return None

    def admit(self, c: Candidate) -> Decision:
        s, led = self.settings, self.ledger
        refused = self.check(c)
        if refused is not None:
            return Decision(None, refused)
        self._take(c)
        if s.mode == "dry-run":
            return Decision(ActionMode.DRY_RUN)
        if led.breaker_until is not None:
            held = BreakerOpen(until=led.breaker_until, why=led.breaker_why)
            return Decision(ActionMode.DRY_RUN, held_back=held)
        return Decision(ActionMode.ENFORCE)

    def evictions_left(self, at: datetime) -> int:
        """Evictions the cluster-wide limit still allows at ``at``: none left, and no plan
        that evicts can pass, so a planner need not search."""
        self.ledger.forget_before(at)
        return max(0, self.settings.max_evictions_cluster - self.ledger.count())

    def admit_all(self, cands: list[Candidate]) -> tuple[list[Decision], GateRefusal | None]:
        """All of a plan's actions or none: they are admitted on a copy of the ledger, which
        replaces the real one only when every one went through, so two evictions of one plan
        cannot both count as the node's last slot. Returns each one's decision and the first
        refusal (None when all went through)."""
        trial, decisions, first = self._trial(cands)
        if first is None:
            self.ledger = trial.ledger
        return decisions, first

    def check_all(self, cands: list[Candidate]) -> GateRefusal | None:
        """The first refusal ``admit_all`` would meet for these actions now, taking nothing:
        what a planner asks of a victim set before it proposes it, so the set it proposes is
        one the gate admits (two evictions each allowed alone may still pass a node's or a
        namespace's limit together)."""
        return self._trial(cands)[2]

    def _trial(self, cands: list[Candidate]) -> tuple[Gate, list[Decision], GateRefusal | None]:
        trial = Gate(self.settings)
        trial.ledger = copy.deepcopy(self.ledger)
        decisions = [trial.admit(c) for c in cands]
        first = next((d.refused for d in decisions if d.refused is not None), None)
        return trial, decisions, first

    def _take(self, c: Candidate) -> None:
        s, led = self.settings, self.ledger
        if c.evicts:
            led.add_eviction(Eviction(c.at, c.node, c.namespace))
        spans = {"pod": s.cooldown_pod_s, "node": s.cooldown_node_s, "job": s.cooldown_job_s}
        for key in _cooldown_keys(c):
            span = spans[key.split(":", 1)[0]]
            if span > 0:
                led.cool(key, c.at + timedelta(seconds=span))

    def outcome(self, c: Candidate, *, ok: bool, at: datetime, signal_open: bool) -> None:
        """How an action carried out went; ``signal_open``: its signal is still open after it."""
        s, led = self.settings, self.ledger
        led.forget_before(at)
        if not ok:
            led.failures.append(at)
            if len(led.failures) >= s.breaker_failures:
                self._trip(at, f"{len(led.failures)} actions failed within {s.window_s:.0f} s")
        if c.signal is None:
            return
        if not signal_open:
            led.acted_on_signal.pop(c.signal, None)
            return
        n = led.acted_on_signal.get(c.signal, 0) + 1
        led.acted_on_signal[c.signal] = n
        if n >= s.breaker_no_improvement:
            self._trip(at, f"{n} actions for signal {c.signal} and it is still open")

    def _trip(self, at: datetime, why: str) -> None:
        led = self.ledger
        led.breaker_until = at + timedelta(seconds=self.settings.breaker_open_s)
        led.breaker_why = why

    def breaker_open(self, at: datetime) -> bool:
        """Whether enforcement is held back at ``at`` (a host's gauge; no state changes)."""
        until = self.ledger.breaker_until
        return until is not None and until > at

    def snapshot(self) -> dict[str, object]:
        return self.ledger.to_json()

    def restore(self, raw: dict[str, object]) -> None:
        self.ledger = Ledger.from_json(raw, window_s=self.settings.window_s)
