"""What `gpufrag explain` says of a gang's stored row (``pod`` = ``namespace/gang:NAME``,
migration 017): the gang's counts, why it waits, and whose reasons the row shows.

A gang starts only when ``minMember`` of its pods run at once, so its row is about a count of
members placed together, not one pod on one node; the words say so, in the table print and in
``--json`` alike.
"""

from __future__ import annotations

from typing import Any

__all__ = ["MEMBER_OF", "gang_figures", "gang_lines", "gang_verdict", "is_gang"]

MEMBER_OF = """
SELECT pod FROM pending_explanations FINAL
WHERE run_id = {run_id:String} AND has(gang_members, {pod:String})
ORDER BY ts DESC
LIMIT 1
"""
"""The gang row that last named a pod among its pending members: a gang's members have no
rows of their own."""

_LISTED = 8
"""Members named in the text; a gang of 64 workers is its count and the first few."""


def is_gang(row: dict[str, Any]) -> bool:
    return row.get("gang") is not None


def gang_verdict(row: dict[str, Any]) -> str:
    """Why the gang waits, in the words of its members placed together."""
    if row["unplaceable"]:
        return (
            "its needed members fit the cluster's free total but not together "
            "(fragmentation): the gang cannot start"
        )
    if row["fits_some_node"]:
        return "its needed members fit together now; it was waiting for the scheduler"
    return "its needed members do not fit even the cluster's free total (the cluster is full)"


def gang_lines(row: dict[str, Any]) -> list[str]:
    """The gang's counts, and whose request and reasons the rest of the row shows."""
    members = [str(m) for m in row["gang_members"]]
    named = ", ".join(members[:_LISTED])
    if len(members) > _LISTED:
        named += f" and {len(members) - _LISTED} more"
    shown = row["gang_member_shown"]
    whose = (
        "the first member that found no room"
        if row["gang_placeable_together"] < row["gang_needed"]
        else "the largest member, all fitting together"
    )
    return [
        f"gang {row['gang']}: minMember {row['gang_min_member']}, {row['gang_bound']} bound, "
        f"{len(members)} pending ({named})",
        f"placed together: {row['gang_placeable_together']} of the {row['gang_needed']} "
        "members still needed",
        f"request and reasons below: {shown} checked alone ({whose})",
    ]


def gang_figures(row: dict[str, Any]) -> dict[str, object] | None:
    """The gang columns as one object; None on a single pod's row."""
    if not is_gang(row):
        return None
    members = [str(m) for m in row["gang_members"]]
    return {
        "name": row["gang"],
        "min_member": row["gang_min_member"],
        "bound": row["gang_bound"],
        "pending": len(members),
        "members": members,
        "placeable_together": row["gang_placeable_together"],
        "needed": row["gang_needed"],
        "member_shown": row["gang_member_shown"],
    }
