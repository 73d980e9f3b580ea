"""Quarantine: cordon and taint a node whose GPU is out of service, and lift both when it is
back.

The cordon keeps new pods off the whole node (kube-scheduler cannot tell a broken card from a
free one); the taint says why, for humans and for tolerating diagnostics pods. Pods already
there are listed, not evicted: whether they can finish is their owner's call.
"""

from __future__ import annotations

from models import ActionKind, Scope, Signal, SignalKind
from streams.cluster.view import ClusterView
from streams.planners.plan import Plan
from streams.planners.planner_registry import register_planner

__all__ = ["Quarantine", "quarantined_node"]


def quarantined_node(signal: Signal) -> str | None:
    if signal.kind != SignalKind.GPU_UNHEALTHY:
        return None
    if signal.scope is Scope.GPU:
        return signal.scope_id.rsplit("/", 1)[0]
    return signal.scope_id if signal.scope is Scope.NODE else None


class Quarantine:
    name = "quarantine"

    def __init__(self) -> None:
        self.faults: dict[str, set[str]] = {}
        """Node -> open gpu_unhealthy fingerprints on it: lifted when the last one clears."""

    def plan(self, signal: Signal, view: ClusterView) -> Plan | None:
        node = quarantined_node(signal)
        if node is None:
            return None
        open_here = self.faults.setdefault(node, set())
        pods = signal.evidence.get("pods", [])
        if signal.state == "open":
            first = not open_here
            open_here.add(signal.fingerprint)
            if not first:
                return None
            profile = view.nodes.get(node)
            if profile is not None and profile.unschedulable:
                return None  # someone cordoned it already; not ours to lift later
            return Plan(
                kind=ActionKind.QUARANTINE,
                signal=signal,
                reason=f"cordon and taint {node}: {signal.summary}",
                node=node,
                node_ops=("cordon", "taint"),
                evidence={"node": node, "fault": signal.summary, "pods_on_faulty_gpu": pods},
            )
        open_here.discard(signal.fingerprint)
        if open_here:
            return None
        del self.faults[node]
        return Plan(
            kind=ActionKind.QUARANTINE,
            signal=signal,
            reason=f"lift the quarantine of {node}: the GPU fault cleared",
            node=node,
            node_ops=("untaint", "uncordon"),
            evidence={"node": node, "lifted": True},
        )

    def snapshot(self) -> dict[str, list[str]]:
        return {n: sorted(fps) for n, fps in sorted(self.faults.items())}

    def restore(self, raw: object) -> None:
        """Take back what ``snapshot`` gave, as JSON read it back: node -> fingerprints."""
        if isinstance(raw, dict):
            self.faults = {str(n): {str(fp) for fp in fps} for n, fps in raw.items()}


register_planner("quarantine", lambda _: Quarantine(), answers=[SignalKind.GPU_UNHEALTHY])
