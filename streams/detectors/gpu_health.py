"""Unhealthy GPUs: a card taken out by a fault, or a node with a problem condition.

The join decides what a card's health is (``streams/profiles/health.py``): a fatal XID, new
uncorrectable ECC errors or HBM row remapping take it out, and it comes back when the evidence
clears or the node is uncordoned. This detector turns that into one signal per faulted card,
naming the fault, the XID's meaning and the pods on the device (whose work the fault may
already have killed), and one per node with a problem condition. A signal resolves when its
card or node is healthy again, or is gone.
"""

from __future__ import annotations

from models import GpuState, NodeProfile, Scope, Severity, Signal, SignalKind
from models.settings import GpuHealthSettings
from models.xid import classify_xid
from streams.cluster.book import SignalBook
from streams.cluster.view import ClusterView
from streams.detectors.detector import Detector

KIND = SignalKind.GPU_UNHEALTHY


class GpuHealth(Detector[GpuHealthSettings]):
    name = "gpu_health"

    def __init__(self, view: ClusterView, book: SignalBook, settings: GpuHealthSettings):
        super().__init__(view, book, settings)
        self.faulted: dict[str, set[tuple[Scope, str]]] = {}
        """Node -> the scopes with an open signal of this detector, to resolve what cleared."""

    def on_node(self, name: str) -> list[Signal]:
        profile = self.view.nodes.get(name)
        now: dict[tuple[Scope, str], tuple[str, dict[str, object]]] = {}
        if profile is not None:
            for g in profile.gpus:
                if g.fault is not None:
                    now[(Scope.GPU, f"{name}/{g.index}")] = _card(name, g)
            if profile.problems and profile.gpus:  # a CPU node's problems are not a GPU's
                now[(Scope.NODE, name)] = _node(profile)
        out: list[Signal] = []
        for scope, scope_id in sorted(self.faulted.get(name, set()) - set(now)):
            out += self.book.resolved(KIND, scope, scope_id)
        for (scope, scope_id), (summary, evidence) in sorted(now.items()):
            out += self.book.opened(
                KIND,
                scope,
                scope_id,
                severity=Severity.CRITICAL,
                summary=summary,
                evidence=evidence,
            )
        if now:
            self.faulted[name] = set(now)
        else:
            self.faulted.pop(name, None)
        return out


def _card(node: str, g: GpuState) -> tuple[str, dict[str, object]]:
    info = classify_xid(g.fault_code) if g.fault_code is not None else None
    pods = sorted(g.pods)
    summary = f"GPU {node}/{g.index} out of service: {g.fault}"
    if pods:
        summary += f"; {len(pods)} pod(s) on it"
    return summary, {
        "fault": g.fault,
        "xid": g.fault_code,
        "xid_meaning": info.meaning if info else None,
        "xid_class": info.kind.value if info else None,
        "since": g.fault_since.isoformat() if g.fault_since else None,
        "pods": pods,
        "memory_total_mib": g.memory_total_mib,
    }


def _node(profile: NodeProfile) -> tuple[str, dict[str, object]]:
    conditions = sorted(profile.problems)
    cards = [g.index for g in profile.gpus]
    return (
        f"node {profile.name} has problem condition(s) {', '.join(conditions)}: its "
        f"{len(cards)} GPU(s) take no new work",
        {
            "conditions": {c: profile.problems[c] for c in conditions},
            "gpus": cards,
            "pods": sorted(profile.pods),
        },
    )
