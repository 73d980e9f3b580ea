"""What the pod half of the join reads from Kubernetes Events about a pod: OOM kills
counted, kube-scheduler's FailedScheduling verdict kept while the pod waits, preemptions
recorded on the victim."""

from __future__ import annotations

from datetime import datetime

from models import PodPhase, SchedulerEvent, TaskProfile
from models.bounds import COUNT_MAX
from models.scheduler_message import pending_verdict, preemption_of

__all__ = ["COUNTED_OOMS", "FAILED_SCHEDULING", "OOM_REASONS", "PREEMPTED", "heard", "waits"]

OOM_REASONS = frozenset({"OOMKilled", "CudaOOM"})
"""A container killed by the kernel for memory, or exited because a GPU allocation failed."""
COUNTED_OOMS = 16
"""OOM-kill event ids a task profile remembers to count each kill once."""
FAILED_SCHEDULING, PREEMPTED = "FailedScheduling", "Preempted"


def waits(node: str | None, phase: PodPhase) -> bool:
    """Unbound and pending: the only time a scheduler's verdict on the pod is news."""
    return node is None and phase == PodPhase.PENDING


def heard(
    prev: TaskProfile, e: SchedulerEvent, at: datetime, *, event_id: str | None
) -> TaskProfile:
    """The profile after an event about the pod: an OOM kill counted, the scheduler's verdict
    kept while it waits, a preemption recorded. Each comes again after a redelivery or a
    watcher's re-list and changes nothing the second time.

    A Preempted event is about the victim, the pod keyed here; the preemptor is named only
    by its uid in the message, and its profile lives under another key (another partition
    in the Faust runner), so the victim's profile is the only one written."""
    if e.reason in OOM_REASONS:
        if event_id is not None and event_id in prev.counted_ooms:
            return prev  # the same kill again (redelivered, re-listed)
        counted = prev.counted_ooms
        if event_id is not None:
            counted = (*counted, event_id)[-COUNTED_OOMS:]
        return prev.model_copy(
            update={"oom_count": prev.oom_count + e.count, "counted_ooms": counted}
        )
    if e.reason == FAILED_SCHEDULING:
        last = prev.scheduler
        if not waits(prev.node, prev.phase) or (last is not None and at < last.at):
            return prev  # bound (or done) meanwhile, or an older verdict arriving late
        verdict = pending_verdict(e.message, at=at)
        if last is not None and verdict.model_copy(update={"at": last.at}) == last:
            # the same verdict again: the scheduler retries a pod every few seconds to minutes
            # and its Event only gains a count, so ``at`` stays when it was first said, and
            # the profile, the store and the disagreement count do not move with the retries
            return prev
        return prev.model_copy(update={"scheduler": verdict})
    if e.reason == PREEMPTED:
        if prev.preempted is not None and at <= prev.preempted.at:
            return prev  # the same preemption again: a copy carries the event's own time
        return prev.model_copy(
            update={
                "preemptions": min(COUNT_MAX, prev.preemptions + e.count),
                "preempted": preemption_of(e.message, at=at, node=e.node),
            }
        )
    return prev
