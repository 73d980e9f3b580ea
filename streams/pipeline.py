"""The pipeline definition: which operators run, built from the settings, kept apart from the
state they hold at run time (the quixstreams way).

Every command and both runners build their operators here and nowhere else, so a replay, a live
watch, a benchmark and a Faust worker run the same join and the same enabled detectors.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from models import AnalysisSettings, DetectorSettings, Envelope, GpufragSettings, Signal
from models.settings import GuardrailSettings, PlannerSettings
from streams.cluster_analysis import ClusterAnalysis
from streams.fragmentation.shapes import TypicalPods
from streams.instants import OrderKey
from streams.planners.acting import Acting
from streams.profiles.join import (
    NodeProfileUpdate,
    ProfileUpdate,
    QueueUpdate,
    TaskProfileUpdate,
)
from streams.profiles.operators import (
    NodeJoin,
    ProfileJoin,
    TaskJoin,
    card_rules,
    ordered_deltas,
)

__all__ = ["Pipeline", "PipelineDef", "define_pipeline"]


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
        return Pipeline(join=self.join(), cluster=self.cluster(), acting=self.acting())


@dataclass(slots=True)
class Pipeline:
    """The operators of one in-process run: the join, then the cluster operator."""

    join: ProfileJoin
    cluster: ClusterAnalysis
    acting: Acting

    def instant(self, at: datetime, signals: list[Signal]) -> list[object]:
        """What an evaluated instant leaves for the history: its signals, the actions planned
        for them, and the cluster's state after it."""
        actions = self.acting.on_signals(at, signals, self.cluster.view) if signals else []
        return [*signals, *actions, self.cluster.report(at)]

    def flush(self) -> list[object]:
        """The end of the input: what is outstanding, and the cluster's final state (with the
        explanations when the last evaluation changed a signal)."""
        signals = self.cluster.flush()
        now = self.cluster.now
        if now is None:
            return []
        actions = self.acting.on_signals(now, signals, self.cluster.view) if signals else []
        return [*signals, *actions, self.cluster.report(now, explain=bool(signals))]

    def state_at(self, at: datetime) -> list[object]:
        """The cluster's state where an interrupted input stopped."""
        return [self.cluster.report(at, explain=False)]

    @staticmethod
    def ordered(env: Envelope, outputs: Sequence[object]) -> list[tuple[OrderKey, ProfileUpdate]]:
        """The join's outputs for one event, each with its place in the event-time order."""
        kinds = (NodeProfileUpdate, TaskProfileUpdate, QueueUpdate)
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
