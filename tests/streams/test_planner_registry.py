"""The planner registry as ``Acting`` uses it: signal kinds routed to the enabled planners in
their order, the eviction-limit short-cut only where every answering planner evicts, the
operator members, and the state of stateful planners kept under their names."""

from __future__ import annotations

from datetime import timedelta

import pytest

from models import Action, ActionKind, SignalKind
from models.settings import GuardrailSettings, PlannerSettings
from streams.planners.acting import Acting, SignalsAt
from streams.planners.consolidate import Consolidate
from streams.planners.planner_registry import PLANNERS, register_planner
from streams.planners.quarantine import Quarantine
from streams.planners.reclaim import Reclaim
from tests.streams.planner_scenarios import T0, PodSpec, build, health_signal

PENDING = SignalKind.UNPLACEABLE_PENDING


def _acting(*enabled: str, **limits: object) -> Acting:
    guardrails = GuardrailSettings.model_validate({"mode": "enforce", **limits})
    return Acting(planners=PlannerSettings(enabled=enabled), guardrails=guardrails)


def test_the_builtins_register_like_an_extension_and_route_in_enabled_order() -> None:
    assert {"consolidate", "reclaim", "quarantine", "evict_aggressor"} <= set(PLANNERS.names())
    acting = _acting("reclaim", "quarantine", "consolidate")
    first, second = acting.routes[PENDING]
    assert isinstance(first, Reclaim) and isinstance(second, Consolidate)
    assert first.cache is second.cache  # one walk of the nodes' pods for both
    (quarantine,) = acting.routes[SignalKind.GPU_UNHEALTHY]
    assert isinstance(quarantine, Quarantine)
    assert SignalKind.OOM_STORM not in acting.routes
    assert acting.spent_skips == {PENDING}
    assert list(_acting().routes) == []


@pytest.mark.parametrize("name", ["gate", "rehearsal", "followups"])
def test_a_name_the_snapshot_uses_cannot_be_registered(name: str) -> None:
    with pytest.raises(ValueError, match="reserved"):
        register_planner(name, lambda _: Quarantine(), answers=[PENDING])


def test_acting_is_an_operator_of_instants_and_keeps_stateful_planners_by_name() -> None:
    p, _ = build({"a": 2, "b": 2}, [PodSpec(name="s1", gpu_milli=500, node="a", cards=(1,))])
    acting = _acting("quarantine")
    assert acting.now is None and acting.next_due() is None
    opened = acting.apply(SignalsAt(T0, [health_signal("open")], p.cluster.view))
    assert {r.kind for r in opened if isinstance(r, Action)} == {ActionKind.QUARANTINE}
    assert acting.now == T0 and acting.flush() == [] and acting.advance(T0) == []
    state = acting.snapshot()
    # a quarantine fences a card, it does not fix its signal: the breaker does not judge it
    assert set(state) == {"gate", "quarantine"}
    assert state["quarantine"] == {"a": [health_signal("open").fingerprint]}
    # a restarted host lifts the quarantine its predecessor put on
    again = _acting("quarantine")
    again.restore(state)
    later = T0 + timedelta(minutes=6)
    lifted = again.on_signals(later, [health_signal("resolved")], p.cluster.view)
    assert [r.target for r in lifted if isinstance(r, Action)] == ["a", "a"]
