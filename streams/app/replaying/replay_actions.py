"""`gpufrag replay --actions`: the planners' actions applied to the simulated cluster, and what
they changed against the same replay without them."""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Iterator
from enum import StrEnum

from models import Envelope, GpufragSettings
from streams.app.sinks.store_output import StoreOutput
from streams.planners.acting import Acting
from streams.runner.embedded import Emission, Failure
from streams.simulation.cluster import SimulatedCluster
from streams.simulation.sim_actuator import Progress, closed_loop

__all__ = ["ActionsChoice", "LoopNotes", "action_summary", "settings_for", "source_of"]


class ActionsChoice(StrEnum):
    OFF = "off"
    DRY_RUN = "dry-run"
    ENFORCE = "enforce"


def settings_for(actions: ActionsChoice, base: GpufragSettings) -> GpufragSettings:
    """The replay's settings: the environment's, with the guardrails' mode from the flag.
    With actions on, pending pods are evaluated at every change rather than every 30 s of
    event time: under the FGD protocol a pod the scheduler fails is dropped half a second
    later, and only an evaluated pod gets a signal a planner can act on."""
    if actions is ActionsChoice.OFF:
        return base.model_copy(
            update={"guardrails": base.guardrails.model_copy(update={"mode": "off"})}
        )
    detectors = base.detectors.model_copy(
        update={
            "unplaceable_pending": base.detectors.unplaceable_pending.model_copy(
                update={"evaluate_every_s": 0.0}
            )
        }
    )
    guardrails = base.guardrails.model_copy(update={"mode": actions.value})
    return base.model_copy(update={"detectors": detectors, "guardrails": guardrails})


class LoopNotes:
    """Tells the closed loop how far the pipeline got (after the store, so what the loop
    acts on next is stored first)."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress

    async def take(self, item: Emission) -> None:
        if item.env is not None:
            self.progress.note(item.at)

    async def dead_letter(self, failure: Failure) -> None:
        self.progress.note(failure.env.event_time)


def source_of(
    sim: SimulatedCluster, progress: Progress
) -> Iterator[Envelope] | AsyncIterator[Envelope]:
    return closed_loop(sim.loop_events(), progress) if sim.options.enforce_actions else sim.events()


def _alloc_pct(sim: SimulatedCluster) -> float:
    c = sim.cluster
    return c.allocated_milli / c.capacity_milli * 100.0 if c.capacity_milli else 0.0


def action_summary(
    sim: SimulatedCluster, baseline: SimulatedCluster | None, output: StoreOutput, acting: Acting
) -> dict[str, object]:
    """``baseline``: the same simulation run to its end without actions (None: this run had
    none, so it is its own baseline)."""
    counts = output.action_counts
    proposed = sum(n.get("proposed", 0) for n in counts.values())
    executed = sum(n.get("executed", 0) for n in counts.values())
    gain = 0.0
    if baseline is not None:
        deque(baseline.events(), maxlen=0)  # run it to its end: only its cluster counts
        gain = _alloc_pct(sim) - _alloc_pct(baseline)
    return {
        "actions_proposed": proposed,
        "actions_executed": executed,
        "pending_made_placeable": sim.made_placeable,
        "pods_evicted": sim.evicted,
        "signals_unplanned_at_eviction_limit": acting.unplanned,
        # plans a node's or namespace's limit held back, searched to be recorded refused
        "plans_held_back_by_a_limit": acting.held_back,
        "planner_errors": acting.errors,
        "allocated_gpu_pct_gain": round(gain, 4),
        "actions": counts,
    }
