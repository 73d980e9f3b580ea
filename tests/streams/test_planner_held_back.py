"""The plan an eviction limit holds back: searched with the limits lifted and every other rule
standing, then refused by the real gate and recorded with its proof. Lifting must never lift a
cooldown (the search would pick the victim an earlier plan already chose) nor write to the
gate's ledger."""

from __future__ import annotations

from datetime import UTC, datetime

from models import ActionKind, PodPhase, TaskProfile
from models.settings import GuardrailSettings
from streams.guardrails.gate import Candidate, Gate
from streams.guardrails.gate_refusals import CoolingDown, ProtectedNamespace, RateLimited
from streams.planners.gate_preview import GatePreview
from tests.streams.profiles_helpers import task as base_task

T0 = datetime(2026, 12, 3, 6, 0, tzinfo=UTC)


def task(key: str, *, node: str = "n1") -> TaskProfile:
    """A running one-GPU pod of priority 0 on ``node``."""
    return base_task(key, gpus=1, milli=1000, node_name=node, phase=PodPhase.RUNNING).model_copy(
        update={"priority": 0}
    )


def spent_gate() -> Gate:
    """One eviction per namespace, already taken in ml by ml/gone, whose pod cools down."""
    gate = Gate(GuardrailSettings(mode="enforce", max_evictions_namespace=1))
    taken = Candidate(
        action_id="a-0", kind=ActionKind.RECLAIM, at=T0, pod="ml/gone", node="n1", priority=0
    )
    assert gate.admit(taken).refused is None
    return gate


def test_lifted_limits_let_the_limited_victim_through_and_nothing_else() -> None:
    gate = spent_gate()
    preview = GatePreview(gate, at=T0)
    ask = {"kind": ActionKind.RECLAIM, "beneficiary_priority": 100}
    free, cooling = task("ml/other"), task("ml/gone")
    protected = task("kube-system/dns")
    assert isinstance(preview.victim(free, **ask), RateLimited)
    ledger_before = (list(gate.ledger.evictions), dict(gate.ledger.cooldowns))
    with preview.rates_lifted():
        assert preview.victim(free, **ask) is None
        assert preview.victims([free, task("ml/third", node="n2")], **ask) is None
        assert isinstance(preview.victim(cooling, **ask), CoolingDown)
        assert isinstance(preview.victim(protected, **ask), ProtectedNamespace)
    # the same gate again once lifted, and its ledger untouched
    assert preview.gate is gate
    assert isinstance(preview.victim(free, **ask), RateLimited)
    assert (list(gate.ledger.evictions), dict(gate.ledger.cooldowns)) == ledger_before
