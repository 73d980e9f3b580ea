"""Pure converters from models to row dicts, one per history table.

Keys match the DDL in ``sql/migrations`` column for column, and every value is a pure function
of the inputs (no clock, no random ids): a redelivered message gives the same row, which the
ReplacingMergeTree keys collapse, so writes are idempotent without inventing ids here. JSON
columns hold orjson output with sorted keys, so equal models give equal text. The hot tables
(events, profiles, cluster reports) are built as value tuples in ``row_values``, which the
embedded runner hands the sink as they are; their dict forms here are the same values.
"""

from __future__ import annotations

import hashlib
from datetime import datetime

import orjson

from connectors.clickhouse.row_values import (
    CLUSTER_COLUMNS,
    EPOCH,
    EVENT_COLUMNS,
    NODE_PROFILE_COLUMNS,
    TASK_PROFILE_COLUMNS,
    cluster_values,
    event_values,
    json_text,
    node_profile_values,
    task_profile_values,
    utc,
)
from models import (
    Action,
    Envelope,
    GpuSampleEvent,
    NodeProfile,
    Signal,
    TaskProfile,
)
from models.analysis import ClusterFragmentation, Explanation
from models.refusal import Refusal

__all__ = [
    "EPOCH",
    "GANG_COLUMNS",
    "QUOTA_COLUMNS",
    "Row",
    "action_row",
    "cluster_row",
    "event_row",
    "explanation_row",
    "gpu_sample_row",
    "json_text",
    "node_profile_row",
    "refusal_row",
    "signal_row",
    "task_peak_row",
    "task_profile_row",
]

Row = dict[str, object]


def _float(value: float | None) -> float | None:
    return None if value is None else float(value)


def _flag(value: bool | None) -> int | None:
    return None if value is None else int(value)


def event_row(run_id: str, env: Envelope, *, ingested_at: datetime) -> Row:
    """One bus message for ``events``; ``ingested_at`` drives the table's 30-day TTL."""
    return dict(zip(EVENT_COLUMNS, event_values(run_id, env, ingested_at=ingested_at), strict=True))


def gpu_sample_row(run_id: str, env: Envelope) -> Row:
    """One GPU sample for ``gpu_samples``; unknown metrics stay NULL, never zero."""
    payload = env.payload
    if not isinstance(payload, GpuSampleEvent):
        raise TypeError(f"gpu_sample_row needs a gpu_sample envelope, got kind {payload.kind!r}")
    sample = payload.sample
    return {
        "run_id": run_id,
        "event_id": env.id,
        "ts": env.event_time,
        "node": sample.node,
        "gpu_index": sample.gpu_index,
        "uuid": sample.uuid,
        "model": sample.model,
        "memory_total_mib": _float(sample.memory_total_mib),
        "memory_used_mib": _float(sample.memory_used_mib),
        "utilization_pct": _float(sample.utilization_pct),
        "xid": sample.xid,
        "pod": sample.pod,
        "namespace": sample.namespace,
        "mig_profile": sample.mig_profile,
        "mig_instance": sample.mig_instance,
        "xid_counts": dict(sample.xid_counts or {}),
        "xid_window_ms": sample.xid_window_ms,
        "rows_remapped_correctable": sample.rows_remapped_correctable,
        "rows_remapped_uncorrectable": sample.rows_remapped_uncorrectable,
        "row_remap_pending": _flag(sample.row_remap_pending),
        "row_remap_failed": _flag(sample.row_remap_failed),
        "engine_active": _float(sample.engine_active),
        "ecc_uncorrected_volatile": sample.ecc_uncorrected_volatile,
    }


def task_peak_row(
    run_id: str, key: str, *, node: str, used_mib: float, at: datetime, seq: int
) -> Row:
    """A pod's new GPU memory peak for ``task_memory_peaks``, under its sample's place in the
    order (``seq``, as the profile tables)."""
    namespace, sep, pod_name = key.partition("/")
    if not sep or not namespace or not pod_name or "/" in pod_name:
        raise ValueError(f"task key {key!r} is not 'namespace/name'")
    return {
        "run_id": run_id,
        "ts": utc(at, "at"),
        "seq": seq,
        "pod": key,
        "namespace": namespace,
        "node": node,
        "used_mib": float(used_mib),
    }


def node_profile_row(
    run_id: str, name: str, profile: NodeProfile | None, *, at: datetime, seq: int
) -> Row:
    """A node profile snapshot; ``profile=None`` records the node's removal (removed=1, zero
    counters, NULL pool and model, profile JSON ``null``)."""
    values = node_profile_values(run_id, name, profile, at=at, seq=seq)
    return dict(zip(NODE_PROFILE_COLUMNS, values, strict=True))


def task_profile_row(
    run_id: str, key: str, profile: TaskProfile | None, *, at: datetime, seq: int
) -> Row:
    """A task profile snapshot; ``profile=None`` records the pod's deletion (removed=1, zero
    counters, empty phase, created_at at the epoch, NULL elsewhere, profile JSON ``null``)."""
    values = task_profile_values(run_id, key, profile, at=at, seq=seq)
    return dict(zip(TASK_PROFILE_COLUMNS, values, strict=True))


def signal_row(run_id: str, signal: Signal) -> Row:
    """A signal in its current state; ``ts`` is when that state was reached (resolution time
    for a resolved signal, opening time otherwise)."""
    return {
        "run_id": run_id,
        "fingerprint": signal.fingerprint,
        "kind": signal.kind,
        "scope": signal.scope.value,
        "scope_id": signal.scope_id,
        "severity": signal.severity.value,
        "state": signal.state,
        "summary": signal.summary,
        "evidence": json_text(signal.evidence),
        "opened_at": signal.opened_at,
        "resolved_at": signal.resolved_at,
        "ts": signal.resolved_at if signal.resolved_at is not None else signal.opened_at,
    }


def action_row(run_id: str, action: Action) -> Row:
    """One action audit record with its evidence as JSON text."""
    return {
        "run_id": run_id,
        "id": action.id,
        "kind": str(action.kind),
        "mode": action.mode.value,
        "outcome": action.outcome.value,
        "target_scope": action.target_scope.value,
        "target": action.target,
        "signal_fingerprint": action.signal_fingerprint,
        "reason": action.reason,
        "evidence": json_text(action.evidence),
        "created_at": action.created_at,
    }


QUOTA_COLUMNS = (
    "quota_blocker",
    "quota_resource",
    "quota_requested",
    "quota_used",
    "quota_nominal",
    "quota_limit",
    "quota_room",
)
"""The columns of ``pending_explanations`` that name the quota holding a pod (migration 016)."""


GANG_COLUMNS = (
    "gang",
    "gang_min_member",
    "gang_bound",
    "gang_members",
    "gang_placeable_together",
    "gang_needed",
    "gang_member_shown",
)
"""The columns of ``pending_explanations`` that hold a gang's figures (migration 017)."""


def explanation_row(
    run_id: str, key: str, exp: Explanation, task: TaskProfile, at: datetime
) -> Row:
    """A pending pod's explanation; for a gang (``key`` = ``namespace/gang:NAME``), ``task``
    is the member its explanation names (``exp.gang.shown``), whose request the row holds."""
    r = task.requests
    return {
        "run_id": run_id,
        # the evaluation's instant, so a verdict joined later replaces the row it completes
        "ts": exp.evaluated_at or at,
        "pod": key,
        "namespace": key.split("/", 1)[0],
        "queue": task.queue,
        "gpu_count": r.gpu_count,
        "gpu_milli": r.gpu_milli,
        "mig": dict(r.mig),
        "gpu_memory_mib": r.gpu_memory_mib,
        "gpu_cores_pct": r.gpu_cores_pct,
        "cpu_milli": r.cpu_milli,
        "memory_mib": r.memory_mib,
        "fits_cluster_total": int(exp.fits_cluster_total),
        "fits_some_node": int(exp.fits_some_node),
        "unplaceable": int(exp.unplaceable),
        "reasons": {reason.value: n for reason, n in exp.blocking},
        "near_misses": orjson.dumps(exp.evidence()["near_misses"]).decode(),
        "nodes_checked": exp.nodes_checked,
        **_scheduler_columns(exp),
        **_quota_columns(exp),
        **_gang_columns(exp),
        # migration 018: why no planner found a fix, on the row of the instant it planned
        "no_fix": json_text([n.model_dump(mode="json") for n in exp.no_fix])
        if exp.no_fix
        else None,
    }


def _gang_columns(exp: Explanation) -> Row:
    """A gang's figures (migration 017); NULL and an empty list on a single pod's row."""
    gang = exp.gang
    if gang is None:
        return {**dict.fromkeys(GANG_COLUMNS), "gang_members": []}
    return {
        "gang": gang.name,
        "gang_min_member": gang.min_member,
        "gang_bound": gang.bound,
        "gang_members": list(gang.members),
        "gang_placeable_together": gang.placeable_together,
        "gang_needed": gang.needed,
        "gang_member_shown": gang.shown,
    }


def _quota_columns(exp: Explanation) -> Row:
    """The first quota object holding the pod, with its figures (migration 016); NULL where
    none does. A pod draws on one queue, and its namespace's ResourceQuota let it in when it
    was created, so there is at most one today."""
    block = exp.quota_blocks[0] if exp.quota_blocks else None
    if block is None:
        return dict.fromkeys(QUOTA_COLUMNS)
    return {
        "quota_blocker": block.key,
        "quota_resource": block.resource,
        "quota_requested": block.requested,
        "quota_used": block.used,
        "quota_nominal": block.nominal,
        "quota_limit": block.limit,
        "quota_room": block.room,
    }


def _scheduler_columns(exp: Explanation) -> Row:
    """The scheduler's verdict beside gpufrag's reasons (migration 013); NULL and empty
    where it gave none while the pod waited."""
    check = exp.scheduler
    if check is None:
        return {
            "scheduler_at": None,
            "scheduler_nodes": None,
            "scheduler_reasons": {},
            "scheduler_message": None,
            "agrees": None,
            "disagreement": "",
        }
    v = check.verdict
    return {
        "scheduler_at": v.at,
        "scheduler_nodes": v.nodes,
        "scheduler_reasons": dict(v.reasons),
        "scheduler_message": v.message,
        "agrees": _flag(check.agrees),
        "disagreement": check.disagreement,
    }


def cluster_row(run_id: str, snap: ClusterFragmentation, at: datetime) -> Row:
    return dict(zip(CLUSTER_COLUMNS, cluster_values(run_id, snap, at), strict=True))


def refusal_row(refusal: Refusal) -> Row:
    """A refused input as a ``dead_letter`` row; the id depends on what arrived and why, so
    the same bad pod met again at every re-list stays one row."""
    key = f"{refusal.source}\x1f{refusal.reason}\x1f{refusal.detail}\x1f{refusal.raw}"
    return {
        "id": hashlib.sha1(key.encode(), usedforsecurity=False).hexdigest(),
        "ts": utc(refusal.at, "at"),
        "target": f"source:{refusal.source}",
        "reason": f"{refusal.reason}: {refusal.detail}",
        "row": refusal.raw,
    }
