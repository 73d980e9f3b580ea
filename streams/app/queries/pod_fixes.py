"""The stored plans that would help one pending pod, for `gpufrag explain` and `gpufrag actions
--pod`: the cause and its proven fix on one screen.

A planner names the pod a plan is for in its evidence (``beneficiary``), beside the what-if
that proves it (``whatif.placeable_before`` / ``placeable_after``). Plans the gate let through
come first, then refusals with the guardrail that stopped them: a refused plan still says which
rule stands between the pod and its fix. Where no planner found a plan at all (the gate turned
every candidate away before a plan existed, or the search came up short), the reasons are on
the pod's explanation row of that instant (``no_fix``, ``streams/planners/no_fix.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from connectors.clickhouse.store import Store

__all__ = [
    "FIXES",
    "NO_FIX",
    "NoFixFound",
    "capacity_text",
    "fix_line",
    "fixes_for",
    "no_fix_for",
    "no_fix_lines",
]

QUOTA_PLANNER = "quota_reclaim"
"""The planner that answers a queue's ``quota_exhausted`` (``streams/planners/quota_reclaim.py``;
named here, not imported: the app reads the store, not the planners)."""

FIXES = """
SELECT id, kind, mode, outcome, target, reason, evidence, created_at
FROM actions FINAL
WHERE run_id = {run_id:String} AND JSONExtractString(evidence, 'beneficiary') = {pod:String}
ORDER BY outcome = 'refused', created_at DESC, id
LIMIT {limit:UInt32}
"""

NO_FIX = """
SELECT ts, no_fix FROM pending_explanations FINAL
WHERE run_id = {run_id:String} AND pod = {pod:String} AND no_fix IS NOT NULL
ORDER BY ts DESC
LIMIT 1
"""

FIX_COUNTS = """
SELECT outcome, count() FROM actions FINAL
WHERE run_id = {run_id:String} AND JSONExtractString(evidence, 'beneficiary') = {pod:String}
GROUP BY outcome
"""


def fixes_for(
    store: Store, run_id: str, pod: str, *, limit: int = 3
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """The first ``limit`` plans for ``pod`` (admitted before refused, newest first), and how
    many of each outcome the run stored for it."""
    res = store.query(FIXES, parameters={"run_id": run_id, "pod": pod, "limit": limit})
    rows = res.dicts()
    for row in rows:
        try:
            row["evidence"] = orjson.loads(str(row["evidence"]))
        except orjson.JSONDecodeError:
            row["evidence"] = {}
    counts = {
        str(outcome): int(n)
        for outcome, n in store.query(FIX_COUNTS, parameters={"run_id": run_id, "pod": pod}).rows
    }
    return rows, counts


@dataclass(frozen=True, slots=True)
class NoFixFound:
    """The latest instant the planners found no fix for the pod, and each one's reason."""

    at: object
    reasons: list[dict[str, Any]]

    def to_json(self) -> dict[str, Any]:
        return {"at": str(self.at), "reasons": self.reasons}


def no_fix_for(store: Store, run_id: str, pod: str) -> NoFixFound | None:
    """The last stored reasons no planner found a fix for ``pod`` (None: none stored)."""
    res = store.query(NO_FIX, parameters={"run_id": run_id, "pod": pod})
    if not res.rows:
        return None
    at, raw = res.rows[0]
    try:
        reasons = orjson.loads(str(raw))
    except orjson.JSONDecodeError:
        reasons = []
    if not isinstance(reasons, list):
        reasons = []
    return NoFixFound(at=at, reasons=[r for r in reasons if isinstance(r, dict)])


def no_fix_lines(found: NoFixFound, *, blocker: str | None = None) -> list[str]:
    """One line per planner: "no fix: <planner>: <reason> (guardrail <rule>)", a shortage
    named as such; the instant it was found last, and the signal it was planned for: its own
    ``unplaceable_pending``, or, for the quota planner, its queue's (``blocker``, the row's
    ``quota_blocker``) ``quota_exhausted``."""
    lines = []
    signals = []
    for r in found.reasons:
        kind = "guardrail" if r.get("guardrail") else "shortage"
        planner = r.get("planner", "?")
        lines.append(f"no fix: {planner}: {r.get('text', '?')} ({kind} {r.get('code', '?')})")
        queue = "its queue" if blocker is None else blocker
        signal = (
            f"{queue}'s quota_exhausted signal"
            if planner == QUOTA_PLANNER
            else "its unplaceable_pending signal"
        )
        signals += [] if signal in signals else [signal]
    lines.append(f"  found at {found.at}, when {' or '.join(signals) or 'a signal'} opened")
    return lines


def capacity_text(row: dict[str, Any]) -> str | None:
    """Why no planner runs for a pod the cluster's free total cannot take and no quota holds
    (``fits_cluster_total`` 0): nothing is unplaceable, it is capacity, not fragmentation. The
    row stores no free total, so the words give the request and the verdict, no figure of the
    free side; None for any other pod."""
    held = row.get("quota_blocker") is not None or "quota" in dict(row["reasons"])
    if row["fits_cluster_total"] or held:
        return None
    asks = f"it asks {_asks(row)}"
    if row.get("gang") is not None:
        asks = (
            f"it needs {row['gang_needed']} members at once, {row['gang_member_shown']} "
            f"asking {_asks(row)}"
        )
    return (
        "no fix gpufrag plans: the cluster's free total is short of this request ("
        f"{asks}; the free total can't cover it): that is capacity, not fragmentation; "
        "kube-scheduler's own preemption frees room for higher priorities"
    )


def _asks(row: dict[str, Any]) -> str:
    """The request in the row's own figures: ``4 GPUs, 8000 mCPU, 32768 MiB``."""
    parts = []
    count, milli = int(row["gpu_count"]), int(row["gpu_milli"])
    if count and milli >= 1000:
        parts.append(f"{count} GPU{'' if count == 1 else 's'}")
    elif count:
        parts.append(f"{count} x {milli} milli-GPU")
    parts += [f"{n} x MIG {profile}" for profile, n in sorted(dict(row["mig"]).items())]
    parts += [f"{row['cpu_milli']} mCPU", f"{row['memory_mib']} MiB"]
    return ", ".join(parts)


def fix_line(row: dict[str, Any]) -> str:
    """One plan in words: what it does, its what-if proof, and what the gate said."""
    ev = row["evidence"] if isinstance(row["evidence"], dict) else {}
    what = _what(str(row["kind"]), ev, str(row["target"]))
    whatif = ev.get("whatif") or {}
    proof = ""
    if "placeable_before" in whatif and "placeable_after" in whatif:
        proof = (
            f"; what-if: placeable before {_yes(whatif['placeable_before'])}, "
            f"after {_yes(whatif['placeable_after'])}"
        )
    verdict = f"{row['outcome']} ({row['mode']})"
    if row["outcome"] == "refused":
        why = ev.get("refused") or row["reason"]
        rule = f" (guardrail {ev['refused_rule']})" if ev.get("refused_rule") else ""
        verdict += f": {why}{rule}"
    return f"{row['kind']} at {row['created_at']}: {what}{proof}; {verdict}"


def _what(kind: str, ev: dict[str, Any], target: str) -> str:
    victims = ev.get("victims")
    if isinstance(victims, list) and victims:
        names = ", ".join(f"{v.get('pod')} on {v.get('node')}" for v in victims)
        return f"evict {names}"
    moves = ev.get("moves")
    if isinstance(moves, dict) and moves:
        names = ", ".join(f"{pod} to {node}" for pod, node in sorted(moves.items()))
        return f"move {names} (frees {ev.get('node', '?')})"
    return f"{kind} {target}"


def _yes(value: object) -> str:
    return "yes" if value is True else "no" if value is False else str(value)
