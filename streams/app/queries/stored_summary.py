"""A run's summary as the store holds it: what `gpufrag sink` records when it stops.

The embedded runner summarises what it computed; the sink did not compute anything, and with
several sinks in one group none of them saw every record, so the figures come from the rows
the store holds for the run (all sinks' together), under the keys `gpufrag replay` uses.
"""

from __future__ import annotations

from connectors.clickhouse.store import Store

LAST_INSTANT = """
SELECT frag_amount_pct, frag_ratio_pct, alloc_pct, unplaceable_pods, stranded_nodes
FROM cluster_frag FINAL
WHERE run_id = {run_id:String}
ORDER BY ts DESC
LIMIT 1
"""
SIGNALS = """
SELECT kind, state, count()
FROM signals FINAL
WHERE run_id = {run_id:String}
GROUP BY kind, state
"""
EVENTS = "SELECT count() FROM events FINAL WHERE run_id = {run_id:String}"


def stored_summary(store: Store, run_id: str) -> dict[str, object]:
    """The cluster's state at the run's last stored instant, its signals by kind and state,
    and its events: the figures a replay's summary gives that the history alone can tell."""
    p = {"run_id": run_id}
    out: dict[str, object] = {"events": int(str(store.query(EVENTS, parameters=p).rows[0][0]))}
    last = store.query(LAST_INSTANT, parameters=p).rows
    if last:
        amount, ratio, alloc, unplaceable, stranded = last[0]
        out |= {
            "frag_amount_pct": round(float(amount), 4),
            "frag_ratio_pct": round(float(ratio), 4),
            "alloc_pct": round(float(alloc), 4),
            "unplaceable_pods": int(unplaceable),
            "stranded_nodes": int(stranded),
        }
    signals: dict[str, dict[str, int]] = {}
    for kind, state, n in store.query(SIGNALS, parameters=p).rows:
        signals.setdefault(str(kind), {})[str(state)] = int(n)
    out["signals"] = signals
    return out
