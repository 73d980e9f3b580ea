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
from streams.guardrails.ledger import Ledger

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


MAX_ANSWERS = 65_536
"""Answers kept before they are dropped and asked again: a quiet ledger (no eviction, no
cooldown ending) keeps them for hours, and each profile a pod had stays kept with them. A
search asks about the pods of its 64 nearest nodes (``search_nodes``), a few thousand at
most, so this holds the pods of many searches."""


class _Answers:
    """``GatePreview.victim``'s answers for one gate and one state of its ledger."""

    __slots__ = ("by_task", "ledger", "version")

    def __init__(self, ledger: Ledger, version: int) -> None:
        self.ledger = ledger
        self.version = version
        self.by_task: dict[
            tuple[int, ActionKindName, int | None], tuple[TaskProfile, GateRefusal | None]
        ] = {}

    def hold(self, ledger: Ledger) -> bool:
        return ledger is self.ledger and ledger.version == self.version


class GatePreview:
    """What the gate would answer now, taking nothing. ``Acting`` builds it on its own gate
    and moves it to each instant before it asks the planners (``move_to``); a planner built
    alone (a test, a tool) gets ``standalone``: an empty ledger, so only the rules that need
    no memory (protection, exemption, priority gap) can refuse."""

    def __init__(self, gate: Gate, *, at: datetime = STANDALONE_AT) -> None:
        self.gate = gate
        self.at = at
        self._asked = gate
        self._lifted: tuple[GuardrailSettings, Gate] | None = None
        self._answers: dict[Gate, _Answers] = {}

    @contextmanager
    def rates_lifted(self) -> Iterator[None]:
        """Ask as if no eviction limit (cluster, node, namespace) were used up, every other
        rule standing (protection, exemption, priority gap, cooldowns): for the plan a limit
        holds back, which ``Acting`` then puts to the real gate to be refused and recorded
        with its proof. Cooldowns stay: lifted, the search would pick the victim an earlier
        plan already chose, the blind spot the preview exists to remove. The same ledger is
        read, never written."""
        settings = self._asked.settings
        if self._lifted is None or self._lifted[0] is not settings:
            # one lifted gate while the settings are the same: its answers are kept too
            if self._lifted is not None:
                self._answers.pop(self._lifted[1], None)
            lifted = Gate(settings.model_copy(update=dict.fromkeys(LIMITS, LIMIT_LIFTED)))
            self._lifted = (settings, lifted)
        lifted = self._lifted[1]
        lifted.ledger = self._asked.ledger
        self.gate = lifted
        try:
            yield
        finally:
            self.gate = self._asked

    @classmethod
    def standalone(cls, guardrails: GuardrailSettings) -> GatePreview:
        return cls(Gate(guardrails))

    def move_to(self, at: datetime) -> None:
        """Ask at ``at`` from now on; drops what expired once, not per question. The one
        way the instant moves: ``victim``'s kept answers rely on it."""
        self.at = at
        self.gate.ledger.forget_before(at)

    def victim(
        self, task: TaskProfile, *, kind: ActionKindName, beneficiary_priority: int | None
    ) -> GateRefusal | None:
        """Why the gate would refuse evicting ``task`` alone now (None: it would not).

        Answers are kept while the gate and its ledger (object and ``version``) stay the
        same, across instants too: the searches ask about the same pods again and again (2.4
        million questions in an enforced replay of the bundled trace, about one search per
        instant), and the answer depends on nothing else. The instant itself does not change
        it: ``move_to`` drops what expired, which bumps the version, so every cooldown left
        runs past the instant and every eviction left is in its window, and the filters'
        answer is the same at any instant until the next change. Profiles are immutable, so
        the pod's object names its facts; the kept object keeps its ``id`` from being
        reused."""
        answers = self._answers.get(self.gate)
        led = self.gate.ledger
        if answers is None or not answers.hold(led) or len(answers.by_task) >= MAX_ANSWERS:
            answers = self._answers[self.gate] = _Answers(led, led.version)
        key = (id(task), kind, beneficiary_priority)
        hit = answers.by_task.get(key)
        if hit is not None:
            return hit[1]
        c = eviction_candidate(
            task,
            action_id="preview",
            kind=kind,
            at=self.at,
            beneficiary_priority=beneficiary_priority,
            signal=None,
        )
        refusal = self.gate.refusal(c)
        answers.by_task[key] = (task, refusal)
        return refusal

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
