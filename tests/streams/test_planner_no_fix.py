"""A search that finds no plan says why: the guardrail that turned its candidates away, or the
shortage no search under the bounds overcomes; the acting step keeps it per pod for the
instant's explanations, and the reports carry it through the distributed runner's codec."""

from __future__ import annotations

from models.actions import NoFix
from models.settings import GuardrailSettings, PlannerSettings
from streams.distributed.codec import decode_report, encode_report
from streams.planners.acting import Acting
from streams.planners.reclaim import Reclaim
from streams.planners.search import GateAsked, Searching
from tests.streams.planner_scenarios import T0, PodSpec, build, settings, unplaceable

WANT = PodSpec(name="want", gpu_milli=1000, gpu_count=2, priority=10)


def _system_pods(namespace: str = "kube-system", **labels: str) -> list[PodSpec]:
    """Two nodes of 2 cards, one card of each held by a pod of ``namespace``: 2 free in all,
    the 2-card pod fits neither."""
    return [
        PodSpec(
            name="s-a", gpu_milli=1000, node="a", cards=(0,), namespace=namespace, labels=labels
        ),
        PodSpec(
            name="s-b", gpu_milli=1000, node="b", cards=(0,), namespace=namespace, labels=labels
        ),
        WANT,
    ]


def _reclaim_answer(pods: list[PodSpec], nodes: dict[str, int] | None = None) -> NoFix:
    p, signals = build(nodes or {"a": 2, "b": 2}, pods)
    signal = unplaceable(signals, WANT.key)
    assert signal is not None
    answer = Reclaim(settings=PlannerSettings(), guardrails=GuardrailSettings()).plan(
        signal, p.cluster.view
    )
    assert isinstance(answer, NoFix), answer
    assert answer.planner == "reclaim"
    return answer


def test_every_victim_in_a_protected_namespace_names_that_namespace() -> None:
    answer = _reclaim_answer(_system_pods())
    assert (answer.code, answer.guardrail, answer.pods, answer.nodes) == (
        "protected_namespace",
        True,
        2,
        2,
    )
    assert answer.text == (
        "every candidate victim (2 pods on 2 nodes) is in protected namespace kube-system"
    )


def test_the_exempt_label_is_named() -> None:
    answer = _reclaim_answer(_system_pods("ml", **{"gpufrag.io/exempt": "true"}))
    assert (answer.code, answer.guardrail) == ("exempt_pod", True)
    assert answer.text.endswith("carries the exempt label gpufrag.io/exempt")


def test_more_victims_than_max_victims_is_a_shortage_not_a_guardrail() -> None:
    # a: 4 cards held by 4 low pods (all four must go); b, c: 2 free cards each beside a pod
    # far above the pending one. 4 free in all, the 4-card pod fits no node.
    pods = [
        PodSpec(name=f"low{i}", gpu_milli=1000, node="a", cards=(i,), priority=0) for i in range(4)
    ]
    pods += [
        PodSpec(name=f"vip-{n}", gpu_milli=1000, gpu_count=2, node=n, cards=(0, 1), priority=90)
        for n in ("b", "c")
    ]
    want = PodSpec(name="want", gpu_milli=1000, gpu_count=4, priority=10)
    p, signals = build({"a": 4, "b": 4, "c": 4}, [*pods, want])
    signal = unplaceable(signals, want.key)
    assert signal is not None
    answer = Reclaim(settings=PlannerSettings(), guardrails=GuardrailSettings()).plan(
        signal, p.cluster.view
    )
    assert isinstance(answer, NoFix)
    assert (answer.code, answer.guardrail, answer.nodes) == ("max_victims", False, 3)
    assert (
        answer.text
        == "no set of at most 3 pods frees enough on one of the 3 nodes that could host it"
    )


def test_acting_keeps_each_planners_reason_for_the_pod_and_proposes_nothing() -> None:
    p, signals = build({"a": 2, "b": 2}, _system_pods(), settings(mode="dry-run"))
    acting = Acting(planners=PlannerSettings(), guardrails=GuardrailSettings())
    assert acting.on_signals(T0, signals, p.cluster.view) == []
    reasons = acting.no_fixes[WANT.key]
    assert [(r.planner, r.code) for r in reasons] == [
        ("consolidate", "protected_namespace"),
        ("reclaim", "protected_namespace"),
    ]
    # the next instant starts empty: the reasons are the instant's, not state
    acting.on_signals(T0, [], p.cluster.view)
    assert acting.no_fixes == {}


def test_a_used_up_cluster_limit_is_recorded_for_the_pod_without_a_search() -> None:
    p, signals = build({"a": 2, "b": 2}, _system_pods("ml"))
    spent = Acting(
        planners=PlannerSettings(),
        guardrails=GuardrailSettings.model_validate({"max_evictions_cluster": 0}),
    )
    assert spent.on_signals(T0, signals, p.cluster.view) == []
    assert spent.unplanned == 1
    (reason,) = spent.no_fixes[WANT.key]
    assert (reason.planner, reason.code, reason.guardrail) == ("gate", "rate_limited", True)
    assert "cluster-wide eviction limit is used up (0 evictions in 600 s)" in reason.text


def test_a_victim_set_the_gate_refuses_whole_is_counted_by_rule() -> None:
    # two victims alone pass, together they pass the node's limit of one
    p, _ = build(
        {"a": 2}, [PodSpec(name=f"v{i}", gpu_milli=1000, node="a", cards=(i,)) for i in range(2)]
    )
    view = p.cluster.view
    searching = Searching(
        settings=PlannerSettings(),
        guardrails=GuardrailSettings.model_validate({"max_evictions_node": 1}),
    )
    gate = GateAsked(searching.preview, kind="reclaim", beneficiary_priority=10)
    assert gate.admits([view.tasks["ml/v0"]])
    assert not gate.admits([view.tasks["ml/v0"], view.tasks["ml/v1"]])
    assert {code: c.pods for code, c in gate.by_rule.items()} == {"rate_limited": 1}


def test_the_reports_carry_the_reasons_through_the_distributed_codec() -> None:
    p, signals = build({"a": 2, "b": 2}, _system_pods())
    out = p.evaluation.instant(p.cluster.now or T0, signals, explain=True)
    assert out.report is not None and out.report.explanations is not None
    exp, _ = out.report.explanations[WANT.key]
    assert [r.code for r in exp.no_fix] == ["protected_namespace", "protected_namespace"]
    assert decode_report(encode_report(out.report)) == out.report
    # the pods nobody planned for carry nothing
    assert all(not e.no_fix for k, (e, _) in out.report.explanations.items() if k != WANT.key)
