"""Every Kafka topic gpufrag uses, declared once: name, key, partitions, retention, compaction.

Keys put state where its joins need it: node-scoped streams (nodes, GPU samples, pod bindings
repartitioned by node) are keyed by node name, so one partition holds everything about a node;
pod streams by "namespace/name". The cluster-wide view reads one low-rate partition of capacity
deltas and the one partition of quota and queue objects, never the high-rate streams.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from models import EventKind

DAY_MS = 24 * 3600 * 1000


@dataclass(frozen=True, slots=True)
class TopicSpec:
    name: str
    partitions: int
    key: str  # what the record key is, for people and for the producers
    configs: dict[str, str] = field(default_factory=dict)

    def full_name(self, prefix: str) -> str:
        return f"{prefix}{self.name}"


def _delete(days: int) -> dict[str, str]:
    return {"cleanup.policy": "delete", "retention.ms": str(days * DAY_MS)}


PODS = TopicSpec("gpufrag.pods", 12, "namespace/name", _delete(7))
NODES = TopicSpec(
    "gpufrag.nodes",
    12,
    "node name",
    {"cleanup.policy": "compact", "min.compaction.lag.ms": "60000"},
)
SCHEDULER_EVENTS = TopicSpec("gpufrag.scheduler-events", 12, "namespace/name or node", _delete(3))
GPU_SAMPLES = TopicSpec("gpufrag.gpu-samples", 12, "node name", _delete(1))
QUEUES = TopicSpec(
    "gpufrag.queues",
    1,  # read by the one-partition cluster view, co-partitioned with its deltas
    "<kind>:namespace/name of the quota or queue object",
    {"cleanup.policy": "compact", "min.compaction.lag.ms": "60000"},
)
NODE_BINDINGS = TopicSpec("gpufrag.node-bindings", 12, "node name", _delete(7))
CAPACITY_DELTAS = TopicSpec("gpufrag.capacity-deltas", 1, "node name or namespace/name", _delete(7))
SIGNALS = TopicSpec("gpufrag.signals", 3, "signal fingerprint", _delete(30))
ACTIONS = TopicSpec("gpufrag.actions", 3, "action id", _delete(90))
DEAD_LETTER = TopicSpec("gpufrag.dead-letter", 3, "source topic", _delete(14))
CLUSTER_REPORTS = TopicSpec(
    "gpufrag.cluster-reports",
    1,  # written by the one-partition cluster view, in instant order
    "instant time (ISO 8601)",
    _delete(30),
)

ALL = (
    PODS,
    NODES,
    SCHEDULER_EVENTS,
    GPU_SAMPLES,
    QUEUES,
    NODE_BINDINGS,
    CAPACITY_DELTAS,
    SIGNALS,
    ACTIONS,
    DEAD_LETTER,
    CLUSTER_REPORTS,
)
INPUT_BY_KIND = {
    EventKind.POD: PODS,
    EventKind.NODE: NODES,
    EventKind.SCHEDULER: SCHEDULER_EVENTS,
    EventKind.GPU_SAMPLE: GPU_SAMPLES,
    EventKind.QUEUE: QUEUES,
}

TABLES = {
    "tasks": PODS.partitions,
    "node-states": NODES.partitions,
    "cluster": CAPACITY_DELTAS.partitions,
}
"""The worker's Faust tables and their partitions (those of the stream that writes them)."""


def changelog(app_id: str, table: str) -> str:
    """A table's changelog topic, named as Faust names it."""
    return f"{app_id}-{table}-changelog"


def changelogs(app_id: str) -> list[TopicSpec]:
    """The tables' changelog topics, named as Faust names them. Created up front, compacted,
    so a worker never races the broker's metadata for a topic it has just declared."""
    return [
        TopicSpec(
            changelog(app_id, table),
            partitions,
            "table key",
            {"cleanup.policy": "compact", "min.compaction.lag.ms": "60000"},
        )
        for table, partitions in TABLES.items()
    ]


def state_schema(app_id: str) -> TopicSpec:
    """Where the app id's state schema version is kept (``state_schema.py``): one key,
    compacted, beside its changelogs."""
    return TopicSpec(
        f"{app_id}-state-schema",
        1,
        "b'schema'",
        {"cleanup.policy": "compact", "min.compaction.lag.ms": "60000"},
    )
