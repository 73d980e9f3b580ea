"""The gate's answer, asked by a planner before it proposes: for one victim, and for a set.

A planner that proposes a victim the gate then refuses has planned for nothing, and, where the
victim stays in the view (a dry run, or an eviction still in flight), the next plan picks the
same cheapest victim and is refused again: on the bundled trace 1,363 refused reclaim plans
named only 9 victims. So the searching planners ask the gate itself, the same ``Gate`` object
``Acting`` admits through, at the same instant: its filters (protected namespace, exempt label,
priority gap, cooldowns, rates) are one judgement, never restated here.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime

from models import TaskProfile
from models.actions import ActionKindName
from models.settings import GuardrailSettings
from streams.guardrails.gate import Candidate, Gate
from streams.guardrails.gate_refusals import GateRefusal

__all__ = ["GatePreview", "eviction_candidate"]

LIMITS = ("max_evictions_cluster", "max_evictions_node", "max_evictions_namespace")
LIMIT_LIFTED = 1 << 30
"""A limit no window's evictions reach: the limits' settings have no "none" value."""
STANDALONE_AT = datetime(1970, 1, 1, tzinfo=UTC)
"""The instant a preview of an empty ledger is asked at: with nothing remembered, no cooldown
or rate can refuse, and the answer is the same at any instant."""


def eviction_candidate(
    task: TaskProfile,
    *,
    action_id: str,
    kind: ActionKindName,
    at: datetime,
    beneficiary_priority: int | None,
    signal: str | None,
) -> Candidate:
    """The gate's view of evicting ``task``: its pod, node, job (its gang, cooled down as a
    whole), labels and priority. One builder for the preview and for ``Acting``'s admission,
    so both ask about the same facts."""
    namespace = task.key.split("/", 1)[0]
    return Candidate(
        action_id=action_id,
        kind=kind,
        at=at,
        pod=task.key,
        node=task.node,
        job=None if task.gang is None else f"{namespace}/{task.gang.name}",
        labels=task.labels,
        priority=task.priority,
        beneficiary_priority=beneficiary_priority,
        signal=signal,
    )


class GatePreview:
    """What the gate would answer now, taking nothing. ``Acting`` builds it on its own gate
    and moves it to each instant before it asks the planners (``move_to``); a planner built
    alone (a test, a tool) gets ``standalone``: an empty ledger, so only the rules that need
    no memory (protection, exemption, priority gap) can refuse."""

    def __init__(self, gate: Gate, *, at: datetime = STANDALONE_AT) -> None:
        self.gate = gate
        self.at = at
        self._asked = gate

    @contextmanager
    def rates_lifted(self) -> Iterator[None]:
        """Ask as if no eviction limit (cluster, node, namespace) were used up, every other
        rule standing (protection, exemption, priority gap, cooldowns): for the plan a limit
        holds back, which ``Acting`` then puts to the real gate to be refused and recorded
        with its proof. Cooldowns stay: lifted, the search would pick the victim an earlier
        plan already chose, the blind spot the preview exists to remove. The same ledger is
        read, never written."""
        lifted = Gate(self.gate.settings.model_copy(update=dict.fromkeys(LIMITS, LIMIT_LIFTED)))
        lifted.ledger = self.gate.ledger
        self.gate = lifted
        try:
            yield
        finally:
            self.gate = self._asked

    @classmethod
    def standalone(cls, guardrails: GuardrailSettings) -> GatePreview:
        return cls(Gate(guardrails))

    def move_to(self, at: datetime) -> None:
        """Ask at ``at`` from now on; drops what expired once, not per question."""
        self.at = at
        self.gate.ledger.forget_before(at)

    def victim(
        self, task: TaskProfile, *, kind: ActionKindName, beneficiary_priority: int | None
    ) -> GateRefusal | None:
        """Why the gate would refuse evicting ``task`` alone now (None: it would not)."""
        c = eviction_candidate(
            task,
            action_id="preview",
            kind=kind,
            at=self.at,
            beneficiary_priority=beneficiary_priority,
            signal=None,
        )
        return self.gate.refusal(c)

    def victims(
        self,
        tasks: Sequence[TaskProfile],
        *,
        kind: ActionKindName,
        beneficiary_priority: int | None,
    ) -> GateRefusal | None:
        """Why the gate would refuse evicting all of ``tasks`` as one plan now: what no
        victim alone shows, two of them passing a node's or a namespace's limit together."""
        cands = [
            eviction_candidate(
                t,
                action_id=f"preview-{n}",
                kind=kind,
                at=self.at,
                beneficiary_priority=beneficiary_priority,
                signal=None,
            )
            for n, t in enumerate(tasks)
        ]
        return self.gate.check_all(cands)
