"""The guardrails' gate: each limit refuses with its own type, and, over random proposals and
settings, no eviction in a protected namespace or of an exempt pod, never more evictions than
the rate limits allow in any window, nothing enforced in dry-run, nothing at all when off."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from models import ActionKind, ActionMode
from models.settings import GuardrailSettings
from streams.guardrails.gate import Candidate, Gate
from streams.guardrails.gate_refusals import (
    BreakerOpen,
    CoolingDown,
    ExemptPod,
    ModeOff,
    PriorityGapTooSmall,
    ProtectedNamespace,
    RateLimited,
)

T0 = datetime(2026, 12, 2, 6, 0, tzinfo=UTC)


def at(s: float) -> datetime:
    return T0 + timedelta(seconds=s)


def evict(
    pod: str, s: float, *, node: str = "n1", prio: int = 0, gets: int | None = 100, **kw: object
) -> Candidate:
    return Candidate(
        action_id=f"a-{pod}-{s}",
        kind=ActionKind.RECLAIM,
        at=at(s),
        pod=pod,
        node=node,
        priority=prio,
        beneficiary_priority=gets,
        **kw,  # type: ignore[arg-type]
    )


ENFORCE = GuardrailSettings(mode="enforce")


def test_each_limit_refuses_with_its_own_type() -> None:
    g = Gate(ENFORCE)
    assert g.admit(evict("kube-system/dns", 0)).refused == ProtectedNamespace(
        namespace="kube-system"
    )
    assert isinstance(
        g.admit(evict("ml/a", 0, labels={"gpufrag.io/exempt": "yes"})).refused, ExemptPod
    )
    assert (
        g.admit(evict("ml/a", 0, labels={"gpufrag.io/exempt": "false"})).mode is ActionMode.ENFORCE
    )
    assert isinstance(g.admit(evict("ml/b", 1, prio=100, gets=100)).refused, PriorityGapTooSmall)
    # the pod just acted on cools down for an hour; a quarantined node for 15 min
    assert g.admit(
        Candidate(action_id="q", kind=ActionKind.QUARANTINE, at=at(1), node="n7")
    ).allowed
    q2 = Candidate(action_id="q2", kind=ActionKind.QUARANTINE, at=at(2), node="n7")
    assert isinstance(g.admit(q2).refused, CoolingDown)
    assert isinstance(g.admit(evict("ml/a", 2)).refused, CoolingDown)
    assert g.admit(evict("ml/a", 3_601)).mode is ActionMode.ENFORCE


def test_rate_limits_count_per_node_namespace_and_cluster_in_a_sliding_window() -> None:
    g = Gate(ENFORCE)  # 2 per node, 5 per namespace, 10 in all, per 600 s
    assert g.admit(evict("ml/a", 0)).allowed and g.admit(evict("ml/b", 10)).allowed
    refused = g.admit(evict("ml/c", 20)).refused
    assert refused == RateLimited(scope="node:n1", limit=2, window_s=600)
    assert g.admit(evict("ml/c", 20, node="n2")).allowed
    assert g.admit(evict("ml/c2", 601, node="n1")).allowed  # the first has left the window
    for i, node in enumerate(["n3", "n4"]):
        assert g.admit(evict(f"ml/d{i}", 602, node=node)).allowed
    assert g.admit(evict("ml/e", 603, node="n5")).refused == RateLimited(
        scope="namespace:ml", limit=5, window_s=600
    )


def test_off_does_nothing_and_dry_run_proposes_under_the_same_limits() -> None:
    assert Gate(GuardrailSettings(mode="off")).admit(evict("ml/a", 0)).refused == ModeOff()
    g = Gate(GuardrailSettings())  # dry-run is the default
    assert g.admit(evict("ml/a", 0)).mode is ActionMode.DRY_RUN
    assert g.admit(evict("ml/b", 1)).mode is ActionMode.DRY_RUN
    assert isinstance(g.admit(evict("ml/c", 2)).refused, RateLimited)


def test_the_breaker_holds_enforcement_back_after_failures_and_when_signals_stay_open() -> None:
    g = Gate(ENFORCE.model_copy(update={"max_evictions_node": 100}))
    for i in range(3):
        c = evict(f"ml/f{i}", i)
        assert g.admit(c).mode is ActionMode.ENFORCE
        g.outcome(c, ok=False, at=at(i), signal_open=False)
    held = g.admit(evict("ml/g", 10))
    assert held.mode is ActionMode.DRY_RUN and isinstance(held.held_back, BreakerOpen)
    assert g.admit(evict("ml/h", 1_803)).mode is ActionMode.ENFORCE  # 1,800 s after the trip

    h = Gate(ENFORCE.model_copy(update={"max_evictions_node": 100}))
    for i in range(3):
        c = evict(f"ml/s{i}", i, signal="0123456789abcdef")
        h.admit(c)
        h.outcome(c, ok=True, at=at(i), signal_open=True)
    assert h.admit(evict("ml/t", 5)).held_back is not None


def test_the_ledger_survives_a_restart() -> None:
    g = Gate(ENFORCE)
    g.admit(evict("ml/a", 0))
    g.admit(evict("ml/b", 1))
    again = Gate(ENFORCE)
    again.restore(g.snapshot())
    assert isinstance(again.admit(evict("ml/c", 2)).refused, RateLimited)
    assert isinstance(again.admit(evict("ml/a", 3, node="n9")).refused, CoolingDown)


NAMESPACES = ["kube-system", "ml", "web", "gpu-operator", "batch"]


@st.composite
def proposals(draw: st.DrawFn) -> list[Candidate]:
    t = 0.0
    out = []
    for i in range(draw(st.integers(0, 60))):
        t += draw(st.sampled_from([0, 0, 5, 30, 120, 700]))
        ns = draw(st.sampled_from(NAMESPACES))
        out.append(
            Candidate(
                action_id=f"a{i}",
                kind=draw(st.sampled_from(list(ActionKind))),
                at=at(t),
                pod=f"{ns}/p{draw(st.integers(0, 9))}",
                node=f"n{draw(st.integers(0, 3))}",
                job=draw(st.none() | st.sampled_from(["j1", "j2"])),
                labels=draw(st.sampled_from([{}, {"gpufrag.io/exempt": "1"}])),
                priority=draw(st.integers(0, 3)),
                beneficiary_priority=draw(st.none() | st.integers(0, 5)),
            )
        )
    return out


gates = st.builds(
    GuardrailSettings,
    mode=st.sampled_from(["off", "dry-run", "enforce"]),
    max_evictions_cluster=st.integers(0, 6),
    max_evictions_node=st.integers(0, 3),
    max_evictions_namespace=st.integers(0, 4),
    window_s=st.sampled_from([60.0, 600.0]),
    cooldown_pod_s=st.sampled_from([0.0, 300.0]),
    cooldown_node_s=st.sampled_from([0.0, 300.0]),
    cooldown_job_s=st.sampled_from([0.0, 300.0]),
)


@settings(max_examples=150, deadline=None)
@given(s=gates, cs=proposals())
def test_no_sequence_of_proposals_gets_past_a_limit(
    s: GuardrailSettings, cs: list[Candidate]
) -> None:
    g = Gate(s)
    admitted = [(c, d) for c in cs if (d := g.admit(c)).allowed]
    if s.mode == "off":
        assert admitted == []
    if s.mode != "enforce":
        assert all(d.mode is ActionMode.DRY_RUN for _, d in admitted)
    evictions = [c for c, _ in admitted if c.evicts]
    for c in evictions:
        assert c.namespace not in s.protected_namespaces
        assert s.exempt_label not in c.labels
        if c.beneficiary_priority is not None:
            assert c.beneficiary_priority - (c.priority or 0) >= s.min_priority_gap
    # in every window ending at an admitted eviction, no limit is passed
    span = timedelta(seconds=s.window_s)
    for c in evictions:
        recent = [e for e in evictions if c.at - span < e.at <= c.at]
        assert len(recent) <= s.max_evictions_cluster
        assert sum(e.node == c.node for e in recent) <= s.max_evictions_node
        assert sum(e.namespace == c.namespace for e in recent) <= s.max_evictions_namespace
