"""Actions on the simulated cluster: what a replay with ``--actions enforce`` executes.

The simulated cluster is the stand-in for kube-scheduler and the kubelets, so it is also the
stand-in for the Eviction API: an eviction frees the pod's resources, and (as a Job or
Deployment controller would) the pod comes back as a new pending pod for the scheduler. Node
cordons and taints are not modelled and are answered as refused.

The loop is closed in event time: where the scheduler fails a pod, the cluster waits
(``Barrier``) until the pipeline has analysed that instant, so the actions planned for it are
applied before the cluster's next decision, as a live cluster would see an actuator that keeps
up. Without ``--actions enforce`` nothing waits and the stream is exactly the one without
actions.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass
from datetime import datetime

from models import Action, ActionMode, ActionOutcome, Envelope
from models.actuation import ACTUATOR_EVIDENCE_KEY, ActionRequest, EvictPod
from streams.placement.sim_scheduler import SimScheduler

__all__ = ["Barrier", "Progress", "SimActuator", "closed_loop"]


@dataclass(frozen=True, slots=True)
class Barrier:
    """The cluster needs the pipeline to have analysed everything up to ``at`` first."""

    at: datetime


class Progress:
    """How far the pipeline's output has got, in event time."""

    def __init__(self) -> None:
        self.seen: datetime | None = None
        self._moved = asyncio.Event()

    def note(self, at: datetime) -> None:
        if self.seen is None or at > self.seen:
            self.seen = at
            self._moved.set()

    async def reached(self, at: datetime) -> None:
        while self.seen is None or self.seen < at:
            self._moved.clear()
            await self._moved.wait()


async def closed_loop(
    items: Iterable[Envelope | Barrier], progress: Progress
) -> AsyncIterator[Envelope]:
    for item in items:
        if isinstance(item, Barrier):
            await progress.reached(item.at)
        else:
            yield item


class SimActuator:
    """``act(request) -> Action`` on the simulated cluster; evictions wait in ``inbox`` for
    the cluster's next decision, which applies them at its own event time."""

    def __init__(
        self, scheduler: SimScheduler, *, namespace: str, clock: Callable[[], datetime]
    ) -> None:
        self.scheduler = scheduler
        self.namespace = namespace
        self.clock = clock
        self.inbox: list[EvictPod] = []
        self.executed = 0

    async def act(self, request: ActionRequest) -> Action:
        if request.mode is not ActionMode.ENFORCE:
            return _record(request, ActionOutcome.PROPOSED, "dry run", self.clock(), dry=True)
        if not isinstance(request, EvictPod):
            why = "the simulated cluster has no cordons or taints"
            return _record(request, ActionOutcome.REFUSED, why, self.clock())
        queued = {r.name for r in self.inbox}
        if request.namespace != self.namespace or (
            request.name not in self.scheduler.bound or request.name in queued
        ):
            return _record(request, ActionOutcome.GONE, "not bound", self.clock())
        self.inbox.append(request)
        self.executed += 1
        return _record(request, ActionOutcome.EXECUTED, "evicted", self.clock())

    def take(self) -> list[EvictPod]:
        out, self.inbox = self.inbox, []
        return out


def _record(
    request: ActionRequest, outcome: ActionOutcome, detail: str, at: datetime, *, dry: bool = False
) -> Action:
    return Action(
        id=request.id,
        kind=request.kind,
        mode=ActionMode.DRY_RUN if dry else ActionMode.ENFORCE,
        outcome=outcome,
        target_scope=request.target_scope,
        target=request.target,
        signal_fingerprint=request.signal_fingerprint,
        reason=request.reason,
        evidence={
            **request.evidence,
            ACTUATOR_EVIDENCE_KEY: {"operation": request.op, "result": detail, "simulated": True},
        },
        created_at=at,
    )
