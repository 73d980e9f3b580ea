"""A toy planner, as an extension would ship one: when the cluster's fragmentation signal
opens, propose cordoning the GPU node with the most pods. Its module and the one
``register_planner`` line below are all it takes: no product module names it, and its action
kind is its own."""

from __future__ import annotations

from models import Scope, Signal, SignalKind
from streams.cluster.view import ClusterView
from streams.planners.plan import Plan
from streams.planners.planner_registry import register_planner

__all__ = ["KIND", "ToyCordon"]

KIND = "toy_cordon"


class ToyCordon:
    name = KIND

    def plan(self, signal: Signal, view: ClusterView) -> Plan | None:
        if signal.scope is not Scope.CLUSTER or signal.state != "open":
            return None
        nodes = [n for n in view.nodes.values() if not n.unschedulable and n.gpus]
        if not nodes:
            return None
        node = min(nodes, key=lambda n: (-len(n.pods), n.name)).name
        return Plan(
            kind=KIND,
            signal=signal,
            reason=f"toy: cordon {node} while the cluster is fragmented",
            node=node,
            node_ops=("cordon",),
            evidence={"node": node},
        )


register_planner(KIND, lambda _: ToyCordon(), answers=[SignalKind.FRAGMENTATION])
