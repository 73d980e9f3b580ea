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

__all__ = ["FIXES", "NO_FIX", "NoFixFound", "fix_line", "fixes_for", "no_fix_for", "no_fix_lines"]

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


def no_fix_lines(found: NoFixFound) -> list[str]:
    """One line per planner: "no fix: <planner>: <reason> (guardrail <rule>)", a shortage
    named as such; the instant it was found last."""
    lines = []
    for r in found.reasons:
        kind = "guardrail" if r.get("guardrail") else "shortage"
        lines.append(
            f"no fix: {r.get('planner', '?')}: {r.get('text', '?')} ({kind} {r.get('code', '?')})"
        )
    lines.append(f"  found at {found.at}, when its unplaceable_pending signal opened")
    return lines


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
