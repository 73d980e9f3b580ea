"""A node's join state as the node-keyed stage keeps it in its table: one JSON value per node,
read back by any later version (fields added since are optional when decoding)."""

from __future__ import annotations

from typing import Any

import orjson

from models import Node, NodeProfile, TaskProfile
from streams.profiles.health import CardHealth
from streams.profiles.join import CardKey, GpuTelemetry, NodeState
from streams.profiles.quiet import QuietRun
from streams.profiles.system_oom import SystemOoms

__all__ = ["decode_node_state", "encode_node_state"]

STATE_VERSION = 1


def _json_of(model: TaskProfile | NodeProfile | Node | None) -> object:
    return None if model is None else model.model_dump(mode="json")


def encode_node_state(st: NodeState) -> bytes:
    """One node's state as the node-keyed half snapshots it (a Faust table value)."""
    return orjson.dumps(
        {
            "v": STATE_VERSION,
            "node": _json_of(st.node),
            "bound": {k: t.model_dump(mode="json") for k, t in st.bound.items()},
            "telemetry": {
                _card_text(card): [
                    t.memory_total_mib,
                    t.memory_used_mib,
                    t.last_xid,
                    t.pods,
                    t.health.to_json(),
                    None if t.quiet is None else t.quiet.to_json(),
                ]
                for card, t in st.telemetry.items()
            },
            "profile": _json_of(st.profile),
            "system_ooms": st.system_ooms.to_json(),
            "peaks": st.peaks,
        }
    )


def _card_text(card: CardKey) -> str:
    index, mig = card
    return str(index) if mig is None else f"{index}/{mig}"


def _card_of(text: str) -> CardKey:
    # "3" (a whole card; the only form before MIG instances were kept apart) or "3/1"
    index, _, mig = text.partition("/")
    return int(index), int(mig) if mig else None


def _telemetry(fields: list[Any]) -> GpuTelemetry:
    # three fields before per-pod figures were kept, four before card health, five before
    # quiet runs
    pods = tuple((str(k), float(v)) for k, v in fields[3]) if len(fields) > 3 else ()
    # a state from before card health: its last XID is the gauge already seen, not news
    health = CardHealth.from_json(fields[4]) if len(fields) > 4 else CardHealth(seen_xid=fields[2])
    quiet = QuietRun.from_json(fields[5]) if len(fields) > 5 else None
    return GpuTelemetry(fields[0], fields[1], fields[2], pods, health, quiet)


def decode_node_state(data: bytes) -> NodeState:
    body = orjson.loads(data)
    return NodeState(
        node=None if body["node"] is None else Node.model_validate(body["node"]),
        bound={k: TaskProfile.model_validate(t) for k, t in body["bound"].items()},
        telemetry={_card_of(c): _telemetry(t) for c, t in body["telemetry"].items()},
        profile=None if body["profile"] is None else NodeProfile.model_validate(body["profile"]),
        system_ooms=SystemOoms.from_json(body.get("system_ooms")),
        # none before peaks were kept here: the next reading of each pod reports its peak
        peaks={str(k): float(v) for k, v in body.get("peaks", {}).items()},
    )
