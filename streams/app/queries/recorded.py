"""The nodes and pods a store recorded, for `gpufrag whatif`: what the cluster really saw, from
the ``events`` table, and what it really did, from ``cluster_frag``."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from connectors.clickhouse.store import Store
from models import NodeEvent, PodEvent
from models.events import EventKind
from streams.fragmentation.shapes import PodShape
from streams.placement.recorded_whatif import CurvePoint, RecordedPod
from streams.placement.spec import NodeSpec, PodSpec

__all__ = ["Recorded", "Window", "read_recorded"]

EVENTS = """
SELECT kind, event_time, payload FROM events FINAL
WHERE run_id = {run_id:String} AND kind IN ('node', 'pod')
  AND event_time >= {since:DateTime64(3, 'UTC')} AND event_time <= {until:DateTime64(3, 'UTC')}
ORDER BY event_time, kind, id
"""
CURVE = """
SELECT ts, alloc_pct, frag_amount_pct FROM cluster_frag FINAL
WHERE run_id = {run_id:String}
  AND ts >= {since:DateTime64(3, 'UTC')} AND ts <= {until:DateTime64(3, 'UTC')}
ORDER BY ts
"""


@dataclass(frozen=True, slots=True)
class Window:
    run_id: str
    since: datetime
    until: datetime


@dataclass(frozen=True, slots=True)
class Recorded:
    nodes: list[NodeSpec]
    pods: list[RecordedPod]
    curve: list[CurvePoint]
    end: datetime
    """The last recorded event: where the window really ends."""


@dataclass(slots=True)
class _PodLife:
    spec: PodSpec
    arrived: datetime
    bound_at: datetime | None = None
    deleted_at: datetime | None = None


def read_recorded(store: Store, window: Window) -> Recorded:
    params = {"run_id": window.run_id, "since": window.since, "until": window.until}
    nodes: dict[str, NodeSpec] = {}
    pods: dict[str, _PodLife] = {}
    end = window.since
    for kind, at, payload in store.query(EVENTS, parameters=params).rows:
        assert isinstance(at, datetime)
        end = max(end, at)
        if kind == EventKind.NODE.value:
            node = NodeEvent.model_validate_json(str(payload))
            if node.change == "delete":
                nodes.pop(node.node.name, None)
                continue
            n = node.node
            nodes[n.name] = NodeSpec(n.name, n.cpu_milli, n.memory_mib, n.gpu_count, n.gpu_model)
            continue
        event = PodEvent.model_validate_json(str(payload))
        pod = event.pod
        life = pods.get(pod.key)
        if life is None:
            r = pod.requests
            shape = PodShape(r.cpu_milli, r.gpu_milli, r.gpu_count, "|".join(pod.gpu_models))
            life = pods[pod.key] = _PodLife(
                PodSpec(name=pod.key, shape=shape, memory_mib=r.memory_mib), pod.created_at
            )
        if event.change == "delete":
            life.deleted_at = life.deleted_at or at
        elif pod.node is not None and life.bound_at is None:
            life.bound_at = at
    curve = [
        CurvePoint(at, float(str(a)), float(str(f)))
        for at, a, f in store.query(CURVE, parameters=params).rows
        if isinstance(at, datetime)
    ]
    return Recorded(
        nodes=list(nodes.values()),
        pods=[RecordedPod(p.spec, p.arrived, p.bound_at, p.deleted_at) for p in pods.values()],
        curve=curve,
        end=end,
    )
