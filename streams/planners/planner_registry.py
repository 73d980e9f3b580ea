"""The planners by name, each with the signal kinds it answers (descheduler's plugin registry).

A planner is its module plus one ``register_planner`` line; the product's own four register
the same way (``builtin.py`` imports them), an extension's module registers when
``GPUFRAG_PLUGINS`` imports it. ``PlannerSettings.enabled`` names which run, in which order;
``Acting`` checks those names here, so a misspelt one stops the command with the known names
listed instead of silently planning nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from models.component_registry import Registry
from models.settings import GuardrailSettings, PlannerSettings
from streams.planners.candidates import HeldCache
from streams.planners.gate_preview import GatePreview
from streams.planners.plan import Planner
from streams.planners.rehearsal import Rehearsal

__all__ = ["PLANNERS", "PlannerEntry", "PlannerInputs", "register_planner"]

RESERVED = frozenset({"gate", "rehearsal", "followups"})
"""Names a planner may not take: ``Acting.snapshot`` keeps the gate's state and the dry
run's rehearsed plans under them."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PlannerInputs:
    """What a builder may use: the settings, and what the planners of one ``Acting`` share."""

    settings: PlannerSettings
    guardrails: GuardrailSettings
    held: HeldCache
    """Each node's held pods, one cache for every planner that searches them (a walk of a
    thousand nodes per plan otherwise)."""
    preview: GatePreview
    """The gate ``Acting`` admits through, asked at the instant being planned: a planner
    proposes only what it would admit."""
    rehearsal: Rehearsal
    """In a dry run, the plans admitted so far counted as done (empty otherwise)."""


Build = Callable[[PlannerInputs], Planner]


@dataclass(frozen=True, slots=True, kw_only=True)
class PlannerEntry:
    build: Build
    answers: frozenset[str]
    """Signal kinds it is asked about; for each kind, the enabled planners are asked in the
    order ``PlannerSettings.enabled`` lists them, and the first plan wins."""
    evicts_only: bool
    """Every plan it makes evicts, and finding one costs a search: while the cluster-wide
    eviction limit is used up, a signal that only such planners answer is not planned for
    (counted in ``Acting.unplanned``), since the gate would refuse any plan."""


PLANNERS: Registry[PlannerEntry] = Registry("planner")


def register_planner(
    name: str, build: Build, *, answers: Iterable[str], evicts_only: bool = False
) -> None:
    """Add a planner: ``build`` makes it from ``PlannerInputs`` once per ``Acting``; it is
    asked about the signals of the kinds in ``answers``."""
    if name in RESERVED:
        raise ValueError(f"planner name {name!r} is reserved")
    entry = PlannerEntry(build=build, answers=frozenset(answers), evicts_only=evicts_only)
    PLANNERS.register(name, entry)
