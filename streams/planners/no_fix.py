"""Why a search ended without a plan, as data (``models.actions.NoFix``), recorded per pod.

Since the searching planners ask the gate before they propose (``gate_preview.py``), a pod whose
every candidate the gate turns away leaves no refused action behind; without this, `gpufrag
explain` could not say which guardrail stands between the pod and its fix. A search keeps a
``SearchTally`` (which rule turned how many candidate pods away on which nodes, whether any
victim set fitted, the budget) and turns it into one ``NoFix`` when it finds nothing.

Where it is stored: on the pod's explanation row of the instant it was planned for
(``Explanation.no_fix``, column ``pending_explanations.no_fix``, migration 018), written by
that instant's report, which both runners build through ``streams.pipeline.Evaluation``. Not as
an action with outcome ``refused``: on the bundled trace (`gpufrag replay --seed 42 --actions
dry-run`, 1,213 nodes) 2,475 unplaceable_pending signals open, 25 evictions are proposed and
2,023 openings end with a no-fix reason (most of the others fit the room a rehearsed plan
frees); as actions they would outnumber the proposals eighty to one, count as refusals in
`gpufrag actions` and the replay summary (0 today), and dilute the dry run's refusal figures
(the cooldown share among them). On the explanation rows they add no row: they fill a column
of 2,023 of the 10,821 rows written at those instants anyway. Planning happens once per signal
opening (``SignalBook.opened``), so a pod gets one entry per opening, never one per
evaluation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from models.actions import NoFix
from streams.guardrails.gate_refusals import (
    CoolingDown,
    ExemptPod,
    GateRefusal,
    PriorityGapTooSmall,
    ProtectedNamespace,
    RateLimited,
)

__all__ = ["RuleCount", "SearchTally", "eviction_limit_spent", "request_shape"]


@dataclass(slots=True)
class RuleCount:
    """The pods one guardrail turned away during one search, and where."""

    first: GateRefusal
    pods: int = 0
    nodes: set[str] = field(default_factory=set)
    subjects: set[str] = field(default_factory=set)
    """What each refusal named (a namespace, a cooldown's or a limit's scope), for the words."""

    def add(self, refusal: GateRefusal, node: str | None) -> None:
        self.pods += 1
        if node is not None:
            self.nodes.add(node)
        subject = _subject(refusal)
        if subject:
            self.subjects.add(subject)


@dataclass(slots=True, kw_only=True)
class SearchTally:
    """What one search for one pending pod met: filled by ``Searching.candidates`` (nodes,
    pods, the gate's answer per pod), ``fewest`` (sets that fit, the budget) and the caller's
    ``accept`` (a consolidation's movers with nowhere to go); the sets the gate refused whole
    are ``GateAsked``'s count."""

    noun: str = "candidate victim"
    """What a candidate is called in the words (a reclaim's victim, a consolidation's mover)."""
    candidate_means: str = "pod"
    """The planner's own filter in words, for when it keeps no pod at all."""
    nodes: int = 0
    """Nodes visited: those that could host the pod were they emptied."""
    kept: int = 0
    """Pods held there that the planner's own filter kept."""
    turned_away: dict[str, RuleCount] = field(default_factory=dict)
    """Rule code -> the kept pods the gate would refuse to evict alone."""
    reachable: int = 0
    """Nodes where all their allowed candidates gone would leave room (``fewest``'s ``live``)."""
    not_viable: int = 0
    """Victim sets that free enough but that the caller's ``viable`` ruled out."""
    budget_spent: str = ""
    """Which budget ran out, in words ("5000 sets tried"); empty: none."""
    unmovable: int = 0
    """Sets the gate admitted whose moved pods found no other node (a consolidation)."""

    def refused(self, refusal: GateRefusal, node: str | None) -> None:
        count = self.turned_away.get(refusal.code)
        if count is None:
            count = self.turned_away[refusal.code] = RuleCount(refusal)
        count.add(refusal, node)

    def no_fix(self, planner: str, *, sets: Mapping[str, RuleCount], most: int) -> NoFix:
        """The one reason the search found nothing, the most telling first: no node at all,
        no candidate, every candidate turned away by the gate, a set refused whole (``sets``:
        ``GateAsked.by_rule``), movers with nowhere to go, the budget, too little even with
        every allowed pod gone, and last the bound on victims (``most``)."""
        n = self.nodes
        where = f"the {n} node{_s(n)} that could host it"
        if n == 0:
            return NoFix(
                planner=planner,
                code="no_node",
                guardrail=False,
                text="no node could host it even with every pod gone (too few cards, CPU or "
                "memory, or ruled out by GPU model, taints or cordons)",
            )
        refused = sum(c.pods for c in self.turned_away.values())
        if self.kept == 0:
            return self._shortage(planner, "no_candidates", f"no {self.candidate_means} on {where}")
        if refused == self.kept:
            return self._guardrail(planner, self.turned_away, every=True)
        if sets:
            return self._sets(planner, sets)
        if self.unmovable or self.not_viable:
            tried = self.unmovable + self.not_viable
            return self._shortage(
                planner,
                "no_room_to_move",
                f"the pods whose moves would free a node have nowhere else to go ({tried} "
                f"set{_s(tried)} tried on {where})",
            )
        if self.budget_spent:
            return self._shortage(
                planner,
                "search_budget",
                f"search budget spent: {self.budget_spent} on {where} without a plan",
            )
        if self.reachable == 0:
            if self.turned_away:
                return self._guardrail(planner, self.turned_away, every=False)
            return self._shortage(
                planner,
                "too_little",
                f"every {self.noun} on {where} gone would still leave too little room",
            )
        return self._shortage(
            planner,
            "max_victims",
            f"no set of at most {most} pod{_s(most)} frees enough on one of {where}",
        )

    def _shortage(self, planner: str, code: str, text: str) -> NoFix:
        return NoFix(planner=planner, code=code, guardrail=False, text=text, nodes=self.nodes)

    def _guardrail(self, planner: str, rules: Mapping[str, RuleCount], *, every: bool) -> NoFix:
        """The rule that turned most pods away names the code; the words list every rule."""
        code, top = max(rules.items(), key=lambda kv: (kv[1].pods, kv[0]))
        pods = sum(c.pods for c in rules.values())
        nodes = len(set().union(*(c.nodes for c in rules.values())))
        count = f"{pods} pod{_s(pods)} on {nodes} node{_s(nodes)}"
        if every and len(rules) == 1:
            text = f"every {self.noun} ({count}) {_phrase(top)[0]}"
        else:
            parts = "; ".join(
                f"{c.pods} {_phrase(c)[1]}"
                for _, c in sorted(rules.items(), key=lambda kv: (-kv[1].pods, kv[0]))
            )
            if every:
                text = f"the guardrails turn away every {self.noun} ({count}): {parts}"
            else:
                text = (
                    f"the pods the guardrails allow free too little; they turn away {count}: "
                    f"{parts}"
                )
        return NoFix(
            planner=planner, code=code, guardrail=True, text=text, pods=top.pods, nodes=self.nodes
        )

    def _sets(self, planner: str, sets: Mapping[str, RuleCount]) -> NoFix:
        code, top = max(sets.items(), key=lambda kv: (kv[1].pods, kv[0]))
        n = sum(c.pods for c in sets.values())
        return NoFix(
            planner=planner,
            code=code,
            guardrail=True,
            text=f"the gate refuses every set of {self.noun}s that frees enough ({n} "
            f"set{_s(n)} asked): {top.first.text()}",
            pods=0,
            nodes=self.nodes,
        )


def request_shape(planner: str) -> NoFix:
    """A request no node search weighs (MIG profiles, HAMi memory caps)."""
    return NoFix(
        planner=planner,
        code="request_shape",
        guardrail=False,
        text="it asks for MIG instances or a HAMi share, which no planner searches for",
    )


def eviction_limit_spent(*, limit: int, window_s: float) -> NoFix:
    """The cluster-wide eviction limit is used up: no planner that only evicts was asked."""
    return NoFix(
        planner="gate",
        code="rate_limited",
        guardrail=True,
        text=f"the cluster-wide eviction limit is used up ({limit} evictions in "
        f"{window_s:.0f} s): no plan was searched for",
    )


def _subject(refusal: GateRefusal) -> str:
    if isinstance(refusal, ProtectedNamespace):
        return refusal.namespace
    if isinstance(refusal, CoolingDown | RateLimited):
        return refusal.scope
    return ""


def _phrase(count: RuleCount) -> tuple[str, str]:
    """What the pods a rule turned away have in common: to follow "every candidate (...)",
    and to follow a count in a list ("2 in protected namespace kube-system")."""
    first, subjects = count.first, sorted(count.subjects)
    if isinstance(first, ProtectedNamespace):
        where = (
            f"protected namespace {subjects[0]}"
            if len(subjects) == 1
            else f"a protected namespace ({_few(subjects)})"
        )
        return f"is in {where}", f"in {where}"
    if isinstance(first, ExemptPod):
        return f"carries the exempt label {first.label}", f"with the exempt label {first.label}"
    if isinstance(first, PriorityGapTooSmall):
        gap = f"a priority less than {first.needed} below the pending pod's ({first.beneficiary})"
        return f"has {gap}", f"with {gap}"
    if isinstance(first, CoolingDown):
        cooling = f"cooling down after a recent action ({_few(subjects)})"
        return f"is {cooling}", cooling
    if isinstance(first, RateLimited):
        limit = f"where an eviction limit is used up ({_few(subjects)})"
        return f"sits {limit}", limit
    return f"is refused: {first.text()}", f"refused: {first.text()}"


def _few(items: list[str], most: int = 3) -> str:
    shown = ", ".join(items[:most])
    return shown + (f" and {len(items) - most} more" if len(items) > most else "")


def _s(n: int) -> str:
    return "" if n == 1 else "s"
