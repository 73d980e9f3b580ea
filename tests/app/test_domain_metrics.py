"""The domain metrics output as a scenario table: raw events through the embedded pipeline's
operators, each instant's output taken by the output registered in the session's registry,
and the families read back from that registry as a scrape would read them."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client import CollectorRegistry

from models import (
    Action,
    ActionMode,
    ActionOutcome,
    Envelope,
    GpufragSettings,
    Node,
    NodeEvent,
    Pod,
    PodEvent,
    PodPhase,
    ResourceRequest,
    Scope,
)
from models.analysis import BlockReason
from streams.app.sinks.domain_metrics import domain_metrics_for
from streams.app.sinks.output_registry import OUTPUTS, OutputContext
from streams.pipeline import define_pipeline
from streams.runner.embedded import Emission
from tests.streams.pipeline_feed import feed

T0 = datetime(2026, 12, 2, 3, 0, tzinfo=UTC)


def node(name: str, *, pool: str | None, model: str, gpus: int, cpu: int = 64_000) -> NodeEvent:
    return NodeEvent(
        change="upsert",
        node=Node(
            name=name,
            cpu_milli=cpu,
            memory_mib=262_144,
            gpu_model=model,
            gpu_count=gpus,
            pool=pool,
        ),
    )


def pod(name: str, *, on: str | None, gpus: int, cpu: int = 8_000) -> PodEvent:
    return PodEvent(
        change="upsert",
        pod=Pod(
            namespace="train",
            name=name,
            uid=f"u-{name}",
            phase=PodPhase.RUNNING if on else PodPhase.PENDING,
            node=on,
            gpu_indices=tuple(range(gpus)) if on else (),
            requests=ResourceRequest(
                cpu_milli=cpu, memory_mib=1024, gpu_count=gpus, gpu_milli=1000
            ),
            created_at=T0,
        ),
    )


def refused(kind: str, rule: str) -> Action:
    return Action(
        id=f"{kind}-{rule}",
        kind=kind,
        mode=ActionMode.DRY_RUN,
        outcome=ActionOutcome.REFUSED,
        target_scope=Scope.POD,
        target="train/x",
        reason="test",
        evidence={"refused": "why", "refused_rule": rule},
        created_at=T0,
    )


@dataclass
class Scenario:
    events: list[NodeEvent | PodEvent]
    gpus: dict[tuple[str, str, str], float]
    """(pool, gpu_model, state) -> GPUs."""
    unplaceable: dict[str, int] = field(default_factory=dict)
    signals: dict[tuple[str, str], float] = field(default_factory=dict)
    idle_whole: int = 0
    actions: list[Action] = field(default_factory=list)


A100 = node("a-0", pool="train", model="A100", gpus=4)
SCENARIOS = {
    "one idle node": Scenario(
        [A100],
        {("train", "A100", "idle"): 4, ("train", "A100", "allocated"): 0},
        idle_whole=4,
    ),
    "pools and models apart, no pool named as none": Scenario(
        [A100, node("h-0", pool=None, model="H100", gpus=8), pod("p0", on="a-0", gpus=3)],
        {
            ("train", "A100", "allocated"): 3,
            ("train", "A100", "idle"): 1,
            ("none", "H100", "idle"): 8,
        },
        idle_whole=9,
    ),
    "a node left with too little CPU strands its idle GPU": Scenario(
        [
            node("a-1", pool="train", model="A100", gpus=4, cpu=16_000),
            pod("p1", on="a-1", gpus=2, cpu=16_000),
        ],
        {("train", "A100", "allocated"): 2, ("train", "A100", "stranded"): 2},
        signals={("stranded_gpus", "warning"): 1},
        idle_whole=2,
    ),
    "a pending pod split across nodes is unplaceable by its reason": Scenario(
        [
            node("a-0", pool="train", model="A100", gpus=2),
            node("a-1", pool="train", model="A100", gpus=2),
            pod("p2", on=None, gpus=3),
        ],
        {("train", "A100", "idle"): 4},
        unplaceable={BlockReason.GPU_COUNT.value: 1},
        signals={("unplaceable_pending", "warning"): 1},
        idle_whole=4,
    ),
    "refusals counted by rule": Scenario(
        [A100],
        {("train", "A100", "idle"): 4},
        idle_whole=4,
        actions=[refused("reclaim", "rate_limited"), refused("reclaim", "rate_limited")],
    ),
}


@pytest.mark.parametrize("case", list(SCENARIOS), ids=list(SCENARIOS))
def test_the_output_exports_the_reports_figures(case: str) -> None:
    sc = SCENARIOS[case]
    registry = CollectorRegistry()
    ctx = OutputContext(settings=GpufragSettings(), run_id="r", command="replay", registry=registry)
    out = dict(OUTPUTS.items())["metrics"](ctx)
    assert out is not None
    p = define_pipeline(GpufragSettings()).build()
    last = T0
    for i, payload in enumerate(sc.events):
        last = T0 + timedelta(seconds=60 * i)
        feed(p, Envelope.wrap(payload, event_time=last, source="test"))
    p.cluster.flush()
    instant = p.instant(last, [])
    instant.actions += sc.actions
    asyncio.run(out.take(Emission(at=last, env=None, instants=[instant])))

    def value(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, labels)

    report = instant.report
    assert report is not None
    assert value("gpufrag_cluster_report_timestamp_seconds") == last.timestamp()
    assert value("gpufrag_cluster_fragmentation_gpus") == report.summary.frag_gpus
    for (pool, model, state), gpus in sc.gpus.items():
        assert value("gpufrag_gpus", pool=pool, gpu_model=model, state=state) == gpus
    # the four states add up to the cards, and idle and stranded to the report's idle
    states = [s for m in registry.collect() if m.name == "gpufrag_gpus" for s in m.samples]
    assert sum(s.value for s in states) == report.summary.capacity_gpus
    idle = sum(s.value for s in states if s.labels["state"] in ("idle", "stranded"))
    assert idle == report.summary.idle_gpus
    for reason in BlockReason:
        want = sc.unplaceable.get(reason.value, 0)
        assert value("gpufrag_pending_unplaceable_pods", reason=reason.value) == want
    assert sum(sc.unplaceable.values()) == report.summary.unplaceable_pods
    for (kind, severity), n in sc.signals.items():
        assert value("gpufrag_signals_open", kind=kind, severity=severity) == n
    assert value("gpufrag_idle_whole_gpus") == sc.idle_whole
    assert value("gpufrag_oom_storms_open") == 0
    assert value("gpufrag_circuit_breaker_open") == 0
    for a in sc.actions:
        labels = {"kind": str(a.kind), "mode": a.mode.value, "outcome": a.outcome.value}
        assert value("gpufrag_actions_total", **labels) == len(sc.actions)
        assert value("gpufrag_guardrail_refusals_total", rule="rate_limited") == len(sc.actions)


def test_a_second_build_in_one_registry_keeps_one_collector() -> None:
    registry = CollectorRegistry()
    assert domain_metrics_for(registry) is domain_metrics_for(registry)


def test_nothing_is_exported_before_the_first_report() -> None:
    registry = CollectorRegistry()
    domain_metrics_for(registry)
    names = {m.name for m in registry.collect() if m.samples}
    assert names == set()
