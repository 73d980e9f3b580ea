"""The pending pods an ``unplaceable_pending`` signal is about: one pod, or a gang's pending
members. What every planner that makes room reads first (reclaim, consolidate, and the
searches they share)."""

from __future__ import annotations

from models import Signal, SignalKind, TaskProfile
from streams.cluster.view import ClusterView

__all__ = ["pending_of"]


def pending_of(signal: Signal, view: ClusterView) -> list[TaskProfile]:
    """The pending pod an unplaceable signal names, or its gang's pending members."""
    if signal.kind != SignalKind.UNPLACEABLE_PENDING or signal.state != "open":
        return []
    if "/gang:" not in signal.scope_id:
        task = view.tasks.get(signal.scope_id)
        return [task] if task is not None and task.key in view.pending else []
    namespace, gang = signal.scope_id.split("/gang:", 1)
    members = [
        view.tasks[k]
        for k in sorted(view.pending)
        if k.startswith(f"{namespace}/")
        and (g := view.tasks[k].gang) is not None
        and g.name == gang
    ]
    return sorted(members, key=lambda t: (-t.requests.total_gpu_milli, t.key))
