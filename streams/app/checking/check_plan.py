"""Which checks `gpufrag check-config` runs: the targets the chosen components reach in the
chosen mode, and what the settings switch on or off. No I/O here."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from models import GpufragSettings

__all__ = ["COMPONENT_TARGETS", "CheckPlan", "Component", "Mode", "Target", "plan_checks"]


class Component(StrEnum):
    """The long-running commands a deployment runs, by command name."""

    WATCH = "watch"
    WORKER = "worker"
    SINK = "sink"
    ALERT = "alert"
    ACTUATE = "actuate"


class Mode(StrEnum):
    EMBEDDED = "embedded"
    """One `gpufrag watch --bus embedded`: the pipeline, the store, the alerts and the actuator
    in one process; no Kafka."""
    DISTRIBUTED = "distributed"
    """The commands as separate processes over Kafka (`watch --bus kafka`, `worker`, `sink`,
    `alert`, `actuate`)."""


class Target(StrEnum):
    KAFKA = "kafka"
    STORE = "store"
    GUARDRAILS = "guardrails"
    ALERTMANAGER = "alertmanager"
    KUBE_WATCH = "kube-watch"
    """The watchers' (and the exporter discovery's) list and watch permissions."""
    KUBE_ACT = "kube-act"
    """The actuator's permissions (evictions, nodes, its Lease)."""


_G, _K = Target.GUARDRAILS, Target.KAFKA
COMPONENT_TARGETS: dict[Mode, dict[Component, frozenset[Target]]] = {
    Mode.DISTRIBUTED: {
        Component.WATCH: frozenset({_K, Target.KUBE_WATCH}),
        Component.WORKER: frozenset({_K, _G}),  # the planners run in the workers
        Component.SINK: frozenset({_K, Target.STORE}),
        Component.ALERT: frozenset({_K, Target.ALERTMANAGER}),
        Component.ACTUATE: frozenset({_K, _G, Target.KUBE_ACT}),
    },
    # each component is a part of the one `watch --bus embedded` process: its targets less Kafka
    Mode.EMBEDDED: {
        Component.WATCH: frozenset({Target.KUBE_WATCH, Target.STORE, _G}),
        Component.WORKER: frozenset({_G}),
        Component.SINK: frozenset({Target.STORE}),
        Component.ALERT: frozenset({Target.ALERTMANAGER}),
        Component.ACTUATE: frozenset({_G, Target.KUBE_ACT}),
    },
}
"""What each component reaches, by mode (the commands' own code: `sink` and an embedded
`watch` write the store, `alert` posts to Alertmanager, `actuate` and an embedded `watch` act
through the actuator)."""


@dataclass(frozen=True, slots=True)
class CheckPlan:
    targets: frozenset[Target]
    """The targets to check."""
    skipped: tuple[str, ...]
    """Why a target a chosen component reaches is not checked, one phrase each."""
    components: tuple[Component, ...]


def plan_checks(
    settings: GpufragSettings, *, components: tuple[Component, ...], mode: Mode
) -> CheckPlan:
    """The targets the components reach in ``mode``, less those the settings leave unused: the
    actuator makes no API client unless the guardrails enforce, and Alertmanager is reached
    only when its URL is set."""
    reached: set[Target] = set()
    for component in components:
        reached |= COMPONENT_TARGETS[mode][component]
    skipped = []
    if Target.KUBE_ACT in reached and settings.guardrails.mode != "enforce":
        reached.discard(Target.KUBE_ACT)
        skipped.append(
            f"the actuator's permissions (guardrails mode {settings.guardrails.mode}: "
            "it makes no API client)"
        )
    if Target.ALERTMANAGER in reached and settings.alerts.alertmanager_url is None:
        reached.discard(Target.ALERTMANAGER)
        skipped.append("Alertmanager (GPUFRAG_ALERTS__ALERTMANAGER_URL is not set)")
    return CheckPlan(targets=frozenset(reached), skipped=tuple(skipped), components=components)
