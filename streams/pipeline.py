"""The pipeline definition: which operators run, built from the settings, kept apart from the
state they hold at run time (the quixstreams way).

Every command and both runners build their operators here and nowhere else, so a replay, a live
watch, a benchmark and a Faust worker run the same join and the same enabled detectors.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from models import Action, AnalysisSettings, DetectorSettings, Envelope, GpufragSettings, Signal
from models.actuation import ActionRequest
from models.analysis import InstantReport
from models.settings import GuardrailSettings, PlannerSettings
from streams.cluster_analysis import ClusterAnalysis
from streams.fragmentation.shapes import TypicalPods
from streams.instants import OrderKey
from streams.planners.acting import Acting
from streams.profiles.join import (
    NodeProfileUpdate,
    ProfileUpdate,
    QueueUpdate,
    QuotaRefused,
    TaskProfileUpdate,
)
from streams.profiles.operators import (
    NodeJoin,
    ProfileJoin,
    TaskJoin,
    card_rules,
    ordered_deltas,
)

__all__ = ["Evaluation", "InstantOutput", "Pipeline", "PipelineDef", "define_pipeline"]


@dataclass(slots=True)
class InstantOutput:
    """What one evaluated event-time instant leaves, one typed channel per consumer: the store
    takes all of them, alert sinks the signals, the actuator the requests, a Kafka host each
    on its own topic. No consumer sorts a mixed list by type."""

    at: datetime
    signals: list[Signal] = field(default_factory=list)
    actions: list[Action] = field(default_factory=list)
    """Audit records: what the planners proposed, and what the gate refused, with why."""
    requests: list[ActionRequest] = field(default_factory=list)
    """What the gate let through in enforce mode, for an actuator to carry out."""
    report: InstantReport | None = None
    """The cluster's state after the instant (None where the host keeps no reports)."""
    breaker_open: bool = False
    """The gate's circuit breaker holds enforcement back at this instant."""


@dataclass(slots=True)
class Evaluation:
    """The per-instant composition both runners call: the acting step on the instant's
    signals, on the same view, then the cluster's state. A Faust worker holds the operators
    in its own tables, so this takes them rather than owning them."""

    cluster: ClusterAnalysis
    acting: Acting
    reports: bool = True

    def instant(
        self, at: datetime, signals: list[Signal], *, explain: bool | None = None
    ) -> InstantOutput:
        out = InstantOutput(at=at, signals=list(signals))
        if signals and self.acting.on:
            for item in self.acting.on_signals(at, signals, self.cluster.view):
                if isinstance(item, Action):
                    out.actions.append(item)
                else:
                    out.requests.append(item)
            # why a pod has no plan goes on its explanation of this instant, in both runners
            self.cluster.note_no_fixes(self.acting.no_fixes)
        if self.reports:
            out.report = self.cluster.report(at, explain=explain)
        out.breaker_open = self.acting.gate.breaker_open(at)
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class PipelineDef:
    view: AnalysisSettings
    detectors: DetectorSettings
    typical: TypicalPods | None
    """The expected workload when it is known (a trace's pod list); None: learn it from the
    pods seen."""
    planners: PlannerSettings = field(default_factory=PlannerSettings)
    guardrails: GuardrailSettings = field(default_factory=GuardrailSettings)

    def task_join(self) -> TaskJoin:
        return TaskJoin()

    def node_join(self) -> NodeJoin:
        return NodeJoin(rules=card_rules(self.detectors))

    def join(self) -> ProfileJoin:
        return ProfileJoin(rules=card_rules(self.detectors))

    def cluster(self) -> ClusterAnalysis:
        return ClusterAnalysis(view=self.view, detectors=self.detectors, typical=self.typical)

    def acting(self) -> Acting:
        return Acting(planners=self.planners, guardrails=self.guardrails)

    def build(self) -> Pipeline:
        """Fresh operators for one in-process run."""
        cluster, acting = self.cluster(), self.acting()
        return Pipeline(
            join=self.join(), cluster=cluster, acting=acting, evaluation=Evaluation(cluster, acting)
        )


@dataclass(slots=True)
class Pipeline:
    """The operators of one in-process run: the join, then the cluster operator."""

    join: ProfileJoin
    cluster: ClusterAnalysis
    acting: Acting
    evaluation: Evaluation

    def instant(self, at: datetime, signals: list[Signal]) -> InstantOutput:
        """What an evaluated instant leaves for the history: its signals, the actions planned
        for them, and the cluster's state after it."""
        return self.evaluation.instant(at, signals)

    def flush(self) -> InstantOutput | None:
        """The end of the input: what is outstanding, and the cluster's final state (with the
        explanations when the last evaluation changed a signal)."""
        signals = list(self.cluster.flush())
        now = self.cluster.now
        if now is None:
            return None
        return self.evaluation.instant(now, signals, explain=bool(signals))

    def state_at(self, at: datetime) -> InstantOutput:
        """The cluster's state where an interrupted input stopped."""
        return InstantOutput(at=at, report=self.cluster.report(at, explain=False))

    @staticmethod
    def ordered(env: Envelope, outputs: Sequence[object]) -> list[tuple[OrderKey, ProfileUpdate]]:
        """The join's outputs for one event, each with its place in the event-time order."""
        kinds = (NodeProfileUpdate, TaskProfileUpdate, QueueUpdate, QuotaRefused)
        updates = [u for u in outputs if isinstance(u, kinds)]
        return ordered_deltas(env, updates)


def define_pipeline(
    settings: GpufragSettings, *, typical: TypicalPods | None = None
) -> PipelineDef:
    return PipelineDef(
        view=settings.analysis,
        detectors=settings.detectors,
        typical=typical,
        planners=settings.planners,
        guardrails=settings.guardrails,
    )
