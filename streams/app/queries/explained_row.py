"""What `gpufrag explain` says of a stored pending explanation: the verdict and the quota that
holds the pod, in words and as JSON, from the row alone (``pending_explanations``).

Apart from the command so that the words are one function each: the table print and
``--json`` say the same thing, and a pod held by its quota is never told it waits for the
scheduler, whatever the nodes have free.
"""

from __future__ import annotations

import json
from typing import Any

from connectors.clickhouse.rows import GANG_COLUMNS, QUOTA_COLUMNS
from streams.app.queries.gang_row import gang_figures, gang_verdict, is_gang
from streams.app.queries.json_values import plain

__all__ = ["explanation_json", "quota_figures", "quota_text", "verdict"]

_UNITS = {
    "nvidia.com/gpu": "GPUs",
    "nvidia.com/gpu.shared": "shared GPUs",
    "nvidia.com/gpumem": "MiB of GPU memory",
}


def _held_by_quota(row: dict[str, Any]) -> bool:
    """A blocker named (migration 016), or ``quota`` among the reasons of a row written
    before the blocker had columns of its own."""
    return row.get("quota_blocker") is not None or "quota" in dict(row["reasons"])


def verdict(row: dict[str, Any]) -> str:
    """One line on why the pod waits: fragmentation, a full cluster, its quota, or (only with
    none of these) the scheduler not having come to it yet."""
    quota = _held_by_quota(row)
    holder = row.get("quota_blocker") or "its queue or quota"
    if is_gang(row):
        text = gang_verdict(row)
        if not quota:
            return text
        if row["fits_some_node"]:
            return f"held by quota: its needed members fit together now, but {holder} has no room"
        return f"{text}, and {holder} has no room for it either"
    if row["unplaceable"]:
        text = "fits the cluster's free total but no single node (fragmentation)"
    elif row["fits_some_node"] and quota:
        return f"held by quota: a node could take it now, but {holder} has no room for it"
    elif row["fits_some_node"]:
        return "fits a node now; it was waiting for the scheduler"
    else:
        text = "does not fit even the cluster's free total (the cluster is full)"
    return f"{text}, and {holder} has no room for it either" if quota else text


def quota_text(row: dict[str, Any]) -> str | None:
    """``blocked by VolcanoQueue:serve: 4 of 4 GPUs used (capability 4); ...``, or None when no
    blocker is stored."""
    key = row.get("quota_blocker")
    if key is None:
        return None
    resource = str(row["quota_resource"])
    unit = _UNITS.get(resource, resource)
    used, nominal, limit = row["quota_used"], row["quota_nominal"], row["quota_limit"]
    of = nominal if limit is None else limit
    return (
        f"blocked by {key}: {used:g} of {of:g} {unit} used ({_terms(str(key), nominal, limit)}); "
        f"the pod asks {row['quota_requested']:g}, it has room for {row['quota_room']:g}"
    )


def _terms(key: str, nominal: float, limit: float | None) -> str:
    """The object's figures in its own kind's words."""
    kind = key.split(":", 1)[0]
    if kind == "VolcanoQueue":
        if limit is None:
            return f"deserved {nominal:g}, no capability: its cohort has none free"
        return (
            f"capability {limit:g}"
            if limit == nominal
            else f"deserved {nominal:g}, capability {limit:g}"
        )
    if kind == "ClusterQueue":
        if limit is None:
            return f"nominal quota {nominal:g}, no borrowing limit: its cohort has none free"
        if limit == nominal:
            return f"nominal quota {nominal:g}"
        return f"nominal quota {nominal:g}, borrowing limit {limit - nominal:g}"
    if kind == "ResourceQuota":
        return f"hard {nominal:g}"
    return f"guaranteed {nominal:g}" + ("" if limit is None else f", limit {limit:g}")


def quota_figures(row: dict[str, Any]) -> dict[str, object] | None:
    """The stored blocker as one object: kind, name, figures and the sentence."""
    key = row.get("quota_blocker")
    if key is None:
        return None
    kind, _, name = str(key).partition(":")
    return {
        "blocker": key,
        "kind": kind,
        "name": name,
        "resource": row["quota_resource"],
        "requested": row["quota_requested"],
        "used": row["quota_used"],
        "nominal": row["quota_nominal"],
        "limit": row["quota_limit"],
        "room": row["quota_room"],
        "text": quota_text(row),
    }


def explanation_json(row: dict[str, Any], *, run_id: str) -> dict[str, object]:
    """The stored row as JSON values, its near misses parsed, the quota columns folded into
    one ``quota`` object (null when nothing holds the pod), the gang columns into one ``gang``
    object (null on a single pod's row), and the verdict in words."""
    folded = (*QUOTA_COLUMNS, *GANG_COLUMNS)
    out = {k: plain(v) for k, v in row.items() if k not in folded}
    out["near_misses"] = json.loads(str(row["near_misses"]))
    return {
        "run_id": run_id,
        **out,
        "verdict": verdict(row),
        "held_by_quota": _held_by_quota(row),
        "quota": quota_figures(row),
        "gang": gang_figures(row),
    }
