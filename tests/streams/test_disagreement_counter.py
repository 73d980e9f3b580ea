"""``gpufrag_explanation_disagreements_total``: the cluster operator counts the scheduler verdicts
that disagree with its explanation, and both runners show that count as a Prometheus counter.

The scenario, from raw events: two nodes with one free T4 each and no taints; a pod asking for
two whole cards (unplaceable: two free cards in total, one per node); kube-scheduler says one
node has a taint it does not tolerate, which gpufrag does not see, so they disagree on "taint".
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from prometheus_client import CollectorRegistry

from models import (
    Envelope,
    GpufragSettings,
    Node,
    NodeEvent,
    PayloadModel,
    Pod,
    PodEvent,
    PodPhase,
    ResourceRequest,
    SchedulerEvent,
    SchedulingEvent,
)
from streams.distributed.stage import StageCounters
from streams.distributed.stages import ClusterLogic, Outlets
from streams.distributed.worker_metrics import WorkerCollector
from streams.instants import OrderKey
from streams.pipeline import define_pipeline
from streams.profiles.join import NodeProfileUpdate, ProfileUpdate, TaskProfileUpdate
from streams.profiles.operators import ProfileJoin
from streams.runner.embedded import EmbeddedRunner, Emission, Failure

T0 = datetime(2026, 3, 1, 8, 0, tzinfo=UTC)
METRIC = "gpufrag_explanation_disagreements_total"
TAINTED = (
    "0/2 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) had untolerated taint "
    "{dedicated: inference}. preemption: 0/2 nodes are available: 2 Preemption is not helpful "
    "for scheduling."
)
SHORT = "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."


def at(s: float) -> datetime:
    return T0 + timedelta(seconds=s)


def wrap(payload: PayloadModel, s: float) -> Envelope:
    return Envelope.wrap(payload, event_time=at(s), source="kube")


def failed(message: str, s: float) -> Envelope:
    event = SchedulerEvent(
        reason="FailedScheduling",
        message=message,
        pod_namespace="ml",
        pod_name="train-0",
        pod_uid="u-train-0",
    )
    return wrap(SchedulingEvent(event=event), s)


def events(*verdicts: tuple[str, float]) -> list[Envelope]:
    nodes = [
        wrap(
            NodeEvent(
                change="upsert",
                node=Node(
                    name=n, cpu_milli=32_000, memory_mib=131_072, gpu_model="T4", gpu_count=1
                ),
            ),
            0,
        )
        for n in ("a", "b")
    ]
    pod = Pod(
        namespace="ml",
        name="train-0",
        uid="u-train-0",
        phase=PodPhase.PENDING,
        requests=ResourceRequest(cpu_milli=4_000, memory_mib=8_192, gpu_count=2, gpu_milli=1000),
        created_at=at(1),
    )
    return [
        *nodes,
        wrap(PodEvent(change="upsert", pod=pod), 1),
        *(failed(m, s) for m, s in verdicts),
    ]


@dataclass
class Collected:
    emissions: list[Emission]

    async def emit(self, item: Emission) -> None:
        self.emissions.append(item)

    async def dead_letter(self, failure: Failure) -> None:
        raise AssertionError(failure.reason)


async def test_the_embedded_runner_counts_each_disagreeing_verdict_once() -> None:
    # the same verdict again 120 s later (a re-list's copy, and evaluations in between)
    # changes nothing; an agreeing one later adds nothing either
    source = events((TAINTED, 1), (TAINTED, 1), (SHORT, 500))
    registry = CollectorRegistry()
    out = Collected([])
    pipeline = define_pipeline(GpufragSettings()).build()
    await EmbeddedRunner(source=source, output=out, pipeline=pipeline, registry=registry).run()
    assert registry.get_sample_value(METRIC, {"reason": "taint"}) == 1.0
    reports = [r for e in out.emissions for r in e.reports() if r.explanations]
    first, last = reports[0].explanations, reports[-1].explanations
    assert first is not None and last is not None
    check = first["ml/train-0"][0].scheduler
    assert check is not None and check.agrees is False and check.reason is not None
    assert check.reason.value == "taint"
    latest = last["ml/train-0"][0].scheduler
    assert latest is not None and latest.agrees is True


class _Sent:
    def __init__(self) -> None:
        self.sent: list[Any] = []

    async def send(self, **kw: Any) -> None:
        self.sent.append(kw)


def _deltas(envs: list[Envelope]) -> list[tuple[OrderKey, ProfileUpdate]]:
    join = ProfileJoin()
    out: list[tuple[OrderKey, ProfileUpdate]] = []
    for seq, env in enumerate(envs):
        env = env.model_copy(update={"seq": seq})
        updates = [
            u for u in join.apply(env) if isinstance(u, NodeProfileUpdate | TaskProfileUpdate)
        ]
        out += [
            (OrderKey(env.event_time, seq, env.source, env.id, i), u) for i, u in enumerate(updates)
        ]
    return out


async def test_a_worker_counts_what_its_cluster_view_finds_and_never_goes_down() -> None:
    counts: dict[str, int] = {}
    signals = _Sent()
    out = Outlets(
        bindings=None,
        deltas=None,
        signals=signals,
        actions=signals,
        bindings_topic="bindings",
        queues_topic="queues",
        binding_partitions=1,
    )
    pipeline = define_pipeline(GpufragSettings())
    logic = ClusterLogic(pipeline, {}, out, StageCounters(counts))
    registry = CollectorRegistry()
    registry.register(WorkerCollector(counters=counts, held=lambda: 0, lag=dict))

    async def feed(envs: list[Envelope], upto: float) -> None:
        for key, delta in _deltas(envs):
            await logic.apply(key, delta)
        await logic.settle(0, at(upto))

    # the pending queue is evaluated every 30 s of event time: by 60 s the verdict was compared
    await feed(events((TAINTED, 1)), 60)
    assert registry.get_sample_value(METRIC, {"reason": "taint"}) == 1.0
    assert any(isinstance(s["value"], bytes) for s in signals.sent)  # the signal went out
    # partitions revoked and assigned again: a fresh view counts from zero, the worker adds
    logic.reset()
    await feed(events((TAINTED, 600)), 700)
    assert registry.get_sample_value(METRIC, {"reason": "taint"}) == 2.0
    assert counts["disagreements/taint"] == 2


def test_the_worker_shows_no_disagreement_before_one() -> None:
    registry = CollectorRegistry()
    registry.register(WorkerCollector(counters={"signals": 3}, held=lambda: 0, lag=dict))
    assert registry.get_sample_value(METRIC, {"reason": "taint"}) is None
