"""Kubernetes events from schedulers and kubelets: the 'why' behind pending pods and kills."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from models.base import Frozen
from models.bounds import COUNT_MAX

__all__ = ["SchedulerEvent"]


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
