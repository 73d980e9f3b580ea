"""The reduced replay run through the core operators in a plain loop: the reference that the
embedded, distributed and store-backed runners are compared with."""

from __future__ import annotations

from connectors.trace.alibaba_csv import read_nodes, read_pods
from connectors.trace.bundled import bundled_nodes_path, bundled_pods_path
from models import Signal
from streams.app.replaying.workload import pod_shape
from streams.cluster_analysis import ClusterAnalysis
from streams.fragmentation.shapes import TypicalPods
from streams.instants import Instants
from streams.profiles.operators import ProfileJoin, ordered_deltas
from streams.simulation.cluster import ReplayOptions, SimulatedCluster, TraceMode

NODE_LIMIT = 40


def operator_signals(
    limit_events: int | None = None, *, flush: bool = True, node_limit: int = NODE_LIMIT
) -> list[Signal]:
    """What the core operators emit for the reduced replay, hosted by nothing but a loop."""
    return operator_run(limit_events, flush=flush, node_limit=node_limit)[0]


def operator_run(
    limit_events: int | None = None, *, flush: bool = True, node_limit: int = NODE_LIMIT
) -> tuple[list[Signal], ProfileJoin]:
    """The signals and the final profiles of the reduced replay, from a plain loop over the
    operators: the join, then the analysis one event-time instant at a time."""
    nodes = read_nodes(bundled_nodes_path())
    pods = read_pods(bundled_pods_path())
    sim = SimulatedCluster(
        nodes,
        pods,
        options=ReplayOptions(
            mode=TraceMode.FGD, node_limit=node_limit, source="trace:openb_pod_list_default"
        ),
    )
    join = ProfileJoin()
    analysis = ClusterAnalysis(typical=TypicalPods.from_shapes(map(pod_shape, pods)))
    instants = Instants(analysis)
    out: list[object] = []
    last = None
    for n, env in enumerate(sim.events()):
        if limit_events is not None and n >= limit_events:
            break
        env = env.model_copy(update={"seq": n})
        if last is not None and env.event_time > last:
            out += instants.release(last)
        for key, u in ordered_deltas(env, join.apply(env)):
            out += instants.add(key, u)
        last = env.event_time
    if last is not None:
        out += instants.release(last)
    if flush:
        out += analysis.flush()
    return signals_of(out), join


def signals_of(outputs: list[object]) -> list[Signal]:
    """The signals among an operator's outputs (it also reports each instant's state)."""
    return [o for o in outputs if isinstance(o, Signal)]
