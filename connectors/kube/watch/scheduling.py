"""CoreV1Event -> models.SchedulerEvent for the reasons that explain placement, eviction and
OOM, a controller's FailedCreate when a ResourceQuota refused its pod, and the OOMKilled events
derived from pod statuses."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from connectors.kube.objects import MappingError, aware
from connectors.kube.watch.failed_create import is_quota_refusal, parse_quota_refusal
from connectors.kube.watch.pods import OomKill
from models import SchedulerEvent
from models.bounds import COUNT_MAX

__all__ = ["event_count", "event_time", "oom_event", "scheduler_event"]


def event_count(event: Any) -> int:
    """How many times the Event happened so far: Kubernetes folds repeats into one object
    (``count`` for core Events, ``series.count`` for events.k8s.io ones)."""
    series = getattr(event, "series", None)
    raw = series.count if series is not None and series.count else event.count
    # absent or 0 is the API's "once" (events.k8s.io leaves it unset); below that is wrong
    if raw is None or raw == 0:
        return 1
    if not isinstance(raw, int) or not 1 <= raw <= COUNT_MAX:
        raise MappingError(f"count {raw!r} is outside 1..{COUNT_MAX}")
    return raw


def event_time(event: Any, *, now: datetime) -> datetime:
    """When it last happened, by the fields the various recorders fill in."""
    series = getattr(event, "series", None)
    for value in (
        series.last_observed_time if series is not None else None,
        event.last_timestamp,
        event.event_time,
        event.first_timestamp,
        event.metadata.creation_timestamp if event.metadata else None,
    ):
        at = aware(value)
        if at is not None:
            return at
    return now


def scheduler_event(event: Any, *, count: int) -> SchedulerEvent:
    """The Event as gpufrag models it, with ``count`` new occurrences. Raises MappingError for
    a quota refusal whose figures cannot be read."""
    involved = event.involved_object
    kind = involved.kind if involved is not None else None
    namespace = (involved.namespace if involved is not None else None) or (
        event.metadata.namespace if event.metadata else None
    )
    pod_namespace = pod_name = pod_uid = node = None
    object_kind = object_namespace = object_name = None
    if kind == "Pod":
        pod_namespace = namespace
        pod_name = involved.name
        pod_uid = involved.uid
    elif kind == "Node":
        node = involved.name
    elif kind:
        object_kind, object_namespace, object_name = kind, namespace, involved.name
    message = event.message or ""
    quota = parse_quota_refusal(message) if is_quota_refusal(event.reason, message) else None
    source = getattr(event, "source", None)
    if node is None and source is not None and source.host:
        node = source.host  # kubelet events (Evicted) name the node they come from
    return SchedulerEvent(
        reason=event.reason,
        message=event.message or "",
        pod_namespace=pod_namespace,
        pod_name=pod_name,
        pod_uid=pod_uid,
        node=node,
        count=max(1, count),
        object_kind=object_kind,
        object_namespace=object_namespace,
        object_name=object_name,
        quota=quota,
    )


def oom_event(
    kill: OomKill, *, namespace: str, name: str, uid: str, node: str | None
) -> SchedulerEvent:
    """A container OOM kill as a scheduling event with its reason (OOMKilled or CudaOOM)."""
    code = f" (exit code {kill.exit_code})" if kill.exit_code is not None else ""
    detail = f": {kill.message[:1000]}" if kill.message else ""
    what = "OOMKilled" if kill.reason == "OOMKilled" else "out of GPU memory"
    return SchedulerEvent(
        reason=kill.reason,
        message=f"container {kill.container} was {what}{code}{detail}",
        pod_namespace=namespace,
        pod_name=name,
        pod_uid=uid or None,
        node=node,
    )
