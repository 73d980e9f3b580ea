"""The hot tables' rows as value tuples in their DDL's column order, beside the column names.

A replay writes about 81,000 rows (25,330 events, 24,100 task and 9,600 node profile snapshots,
21,600 cluster reports); building each as a dict, then reading it back into a list per row to
insert, cost about 1 s of a 22 s replay. A tuple per row is one allocation, the sink buffers it
as it is, and a batch becomes columns with one ``zip`` for clickhouse-connect's column-oriented
insert. ``rows.py`` keeps the dict form of every table (``dict(zip(COLUMNS, values))``) for the
other callers and the tests; the values are the same pure functions of the inputs.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import orjson
from pydantic import BaseModel

from models import Envelope, NodeProfile, TaskProfile
from models.analysis import ClusterFragmentation

__all__ = [
    "CLUSTER_COLUMNS",
    "EPOCH",
    "EVENT_COLUMNS",
    "NODE_PROFILE_COLUMNS",
    "TASK_PROFILE_COLUMNS",
    "Values",
    "cluster_values",
    "event_values",
    "json_text",
    "node_profile_values",
    "task_profile_values",
    "utc",
]

Values = tuple[object, ...]
"""One row's values, in the order of its table's ``*_COLUMNS``."""

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
"""The "zero" of a non-Nullable DateTime64 column, used in rows of removed tasks."""

_SORTED = orjson.OPT_SORT_KEYS


def json_text(value: BaseModel | Any) -> str:
    """Canonical JSON text (sorted keys) of a model or a plain JSON value: the bytes of
    ``models.to_json``, without its ``model_dump`` wrapper (a tenth of the call, 81,000 calls
    a replay)."""
    if isinstance(value, BaseModel):
        value = value.__pydantic_serializer__.to_python(value, mode="json")
    return orjson.dumps(value, option=_SORTED).decode()


def utc(value: datetime, what: str) -> datetime:
    if value.tzinfo is UTC:  # what the models hold: nothing to check or convert
        return value
    # Same rule as the models: a naive time would be read in some local zone, silently.
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{what} must be a timezone-aware datetime, got naive {value!r}")
    return value.astimezone(UTC)


EVENT_COLUMNS = (
    "run_id",
    "id",
    "kind",
    "key",
    "event_time",
    "source",
    "schema_version",
    "payload",
    "ingested_at",
)


def event_values(run_id: str, env: Envelope, *, ingested_at: datetime) -> Values:
    """One bus message for ``events``; ``ingested_at`` drives the table's 30-day TTL."""
    return (
        run_id,
        env.id,
        env.payload.kind,  # the EventKind's value (a str enum): what env.kind.value reads
        env.key,
        env.event_time,
        env.source,
        env.schema_version,
        json_text(env.payload),
        utc(ingested_at, "ingested_at"),
    )


NODE_PROFILE_COLUMNS = (
    "run_id",
    "ts",
    "seq",
    "node",
    "pool",
    "gpu_model",
    "gpus",
    "gpu_milli_free",
    "gpus_full_free",
    "cpu_milli_free",
    "memory_mib_free",
    "unschedulable",
    "pods",
    "removed",
    "profile",
)


def node_profile_values(
    run_id: str, name: str, profile: NodeProfile | None, *, at: datetime, seq: int
) -> Values:
    """A node profile snapshot; ``profile=None`` records the node's removal (removed=1, zero
    counters, NULL pool and model, profile JSON ``null``)."""
    ts = utc(at, "at")
    if profile is None:
        return (run_id, ts, seq, name, None, None, 0, 0, 0, 0, 0, 0, 0, 1, "null")
    if profile.name != name:
        raise ValueError(f"node_profile_row for {name!r} got the profile of {profile.name!r}")
    return (
        run_id,
        ts,
        seq,
        name,
        profile.pool,
        profile.gpu_model,
        len(profile.gpus),
        profile.gpu_milli_free_total,
        profile.full_free_gpus,
        profile.cpu_milli_free,
        profile.memory_mib_free,
        int(profile.unschedulable),
        len(profile.pods),
        0,
        json_text(profile),
    )


TASK_PROFILE_COLUMNS = (
    "run_id",
    "ts",
    "seq",
    "pod",
    "namespace",
    "queue",
    "tenant",
    "phase",
    "node",
    "cpu_milli",
    "memory_mib",
    "gpu_count",
    "gpu_milli",
    "created_at",
    "bound_at",
    "wait_s",
    "oom_count",
    "removed",
    "profile",
)


def task_profile_values(
    run_id: str, key: str, profile: TaskProfile | None, *, at: datetime, seq: int
) -> Values:
    """A task profile snapshot; ``profile=None`` records the pod's deletion (removed=1, zero
    counters, empty phase, created_at at the epoch, NULL elsewhere, profile JSON ``null``)."""
    ts = utc(at, "at")
    namespace, sep, pod_name = key.partition("/")
    if not sep or not namespace or not pod_name or "/" in pod_name:
        raise ValueError(f"task key {key!r} is not 'namespace/name'")
    if profile is None:
        removed = (None, None, "", None, 0, 0, 0, 0, EPOCH, None, None, 0, 1, "null")
        return (run_id, ts, seq, key, namespace, *removed)
    if profile.key != key:
        raise ValueError(f"task_profile_row for {key!r} got the profile of {profile.key!r}")
    requests = profile.requests
    return (
        run_id,
        ts,
        seq,
        key,
        namespace,
        profile.queue,
        profile.tenant,
        profile.phase.value,
        profile.node,
        requests.cpu_milli,
        requests.memory_mib,
        requests.gpu_count,
        requests.gpu_milli,
        profile.created_at,
        profile.bound_at,
        profile.wait_s,
        profile.oom_count,
        0,
        json_text(profile),
    )


CLUSTER_COLUMNS = (
    "run_id",
    "ts",
    "nodes",
    "capacity_gpus",
    "idle_gpus",
    "frag_gpus",
    "frag_amount_pct",
    "frag_ratio_pct",
    "alloc_pct",
    "arrived_pct",
    "typical_pods",
    "pending_pods",
    "unplaceable_pods",
    "stranded_nodes",
    "stranded_gpus",
)


def cluster_values(run_id: str, snap: ClusterFragmentation, at: datetime) -> Values:
    return (
        run_id,
        at,
        snap.nodes,
        snap.capacity_gpus,
        snap.idle_gpus,
        snap.frag_gpus,
        snap.frag_amount_pct,
        snap.frag_ratio_pct,
        snap.alloc_pct,
        snap.arrived_pct,
        snap.typical_pods,
        snap.pending_pods,
        snap.unplaceable_pods,
        snap.stranded_nodes,
        snap.stranded_gpus,
    )
