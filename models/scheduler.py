"""Kubernetes events from schedulers and kubelets: the 'why' behind pending pods and kills."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from models.base import Frozen, UtcDatetime
from models.bounds import COUNT_MAX, Count
from models.quota_refusal import QuotaRefusal

__all__ = ["PendingVerdict", "Preemption", "SchedulerEvent"]


def _unset(value: object) -> bool:
    return value is None


class SchedulerEvent(Frozen):
    """A Kubernetes Event, reduced to what explains placement and OOMs. `reason` stays a free
    string (FailedScheduling, Preempted, Scheduled, Evicted, SystemOOM, OOMKilled, ...) because
    schedulers (Volcano, Kueue, HAMi) add their own; the message keeps the original wording."""

    reason: Annotated[str, Field(min_length=1)]
    message: str
    pod_namespace: str | None = None
    pod_name: str | None = None
    pod_uid: str | None = None
    node: str | None = None
    count: Annotated[int, Field(ge=1, le=COUNT_MAX)] = 1
    """Kubernetes folds repeats into one Event with a count; kept so rates stay right."""
    # Left out of the JSON when unset, so the events that carried none keep their bytes and
    # envelope ids, and a worker not yet upgraded still reads them.
    object_kind: Annotated[str | None, Field(exclude_if=_unset)] = None
    """The involved object's kind when it is neither a Pod nor a Node: the owner a
    controller's Event is about (Job, ReplicaSet, StatefulSet, ...)."""
    object_namespace: Annotated[str | None, Field(exclude_if=_unset)] = None
    object_name: Annotated[str | None, Field(exclude_if=_unset)] = None
    quota: Annotated[QuotaRefusal | None, Field(exclude_if=_unset)] = None
    """A FailedCreate Event's ResourceQuota refusal, read from its message; None for every
    other Event, and for a refusal in wording gpufrag cannot read (the message keeps it)."""

    @property
    def owner(self) -> str | None:
        """``Kind namespace/name`` of the involved object that is not a pod or node."""
        if self.object_kind is None or self.object_name is None:
            return None
        return f"{self.object_kind} {self.object_namespace or 'default'}/{self.object_name}"


SCHEDULER_TEXT_MAX = 240
"""Characters of a scheduler's own wording a task profile keeps: a FailedScheduling line
with a taint or two is about 200; the profile is persisted per pod in both runners, so a
pathological message (a webhook's stack trace) must not grow it."""
SCHEDULER_REASONS_MAX = 8
"""Distinct reasons kept from one verdict: kube-scheduler's in-tree filters give about 15
texts, a real pod meets 2-4; the rest are folded into ``other``."""


class PendingVerdict(Frozen):
    """kube-scheduler's latest FailedScheduling verdict on a pod that waits: what it said,
    read into counted reasons, kept beside gpufrag's own explanation of the same pod."""

    at: UtcDatetime
    """When the scheduler first said this (a repeat of the same verdict keeps it): its view
    at that moment, not now."""
    nodes: Annotated[int, Field(ge=0, le=COUNT_MAX)] | None = None
    """N of "0/N nodes are available"; None: the message had another shape."""
    reasons: dict[Annotated[str, Field(max_length=SCHEDULER_TEXT_MAX)], Count] = Field(
        default_factory=dict, max_length=SCHEDULER_REASONS_MAX
    )
    """Reason -> nodes it names: gpufrag's ``BlockReason`` words where there is one (taint,
    gpu_count, cpu, ...), else the scheduler's text (node affinity, volumes, ports)."""
    message: Annotated[str, Field(max_length=SCHEDULER_TEXT_MAX)] | None = None
    """The message itself, cut, when it could not be read (another scheduler's wording)."""


class Preemption(Frozen):
    """A pod taken off its node so that a higher-priority pod could run (the victim's side:
    kube-scheduler's Preempted event is about the victim)."""

    at: UtcDatetime
    by: Annotated[str, Field(max_length=SCHEDULER_TEXT_MAX)] | None = None
    """The preemptor as the message names it: "uid:<uid>" (kube-scheduler since 1.22) or
    "namespace/name" (older); None when the message names none."""
    node: Annotated[str, Field(max_length=SCHEDULER_TEXT_MAX)] | None = None
    message: Annotated[str, Field(max_length=SCHEDULER_TEXT_MAX)] | None = None
    """The message itself, cut, when it could not be read."""
