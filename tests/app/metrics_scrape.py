"""Reading a scrape of the domain gauges, and comparing it with the ``cluster_frag`` row of
the instant it names (the replay's test and the two runners' parity test)."""

from __future__ import annotations

import math

import pytest
from prometheus_client.parser import text_string_to_metric_families

from connectors.clickhouse.store import Store

REPORT_AT = ("gpufrag_cluster_report_timestamp_seconds", ())
COLUMNS = (
    "capacity_gpus",
    "idle_gpus",
    "frag_gpus",
    "frag_ratio_pct",
    "unplaceable_pods",
    "stranded_nodes",
    "stranded_gpus",
)
Scrape = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def parse(body: str) -> Scrape:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(body)
        for s in family.samples
    }


def summed(scrape: Scrape, name: str, **match: str) -> float:
    return math.fsum(
        v
        for (n, labels), v in scrape.items()
        if n == name and all(dict(labels).get(k) == want for k, want in match.items())
    )


def rows_by_instant(store: Store, run_id: str | None = None) -> dict[int, dict[str, float]]:
    """``cluster_frag`` rows by their instant in ms (one run's, or the store's only run)."""
    where = "" if run_id is None else " WHERE run_id = {run_id:String}"
    got = store.query(
        f"SELECT toUnixTimestamp64Milli(ts), {', '.join(COLUMNS)} FROM cluster_frag FINAL{where}",
        parameters=None if run_id is None else {"run_id": run_id},
    )
    return {int(str(r[0])): dict(zip(COLUMNS, map(float, r[1:]), strict=True)) for r in got.rows}


def instant_of(scrape: Scrape) -> int | None:
    at = scrape.get(REPORT_AT)
    return None if at is None else round(at * 1000)


def compare(scrape: Scrape, row: dict[str, float]) -> None:
    assert scrape[("gpufrag_cluster_fragmentation_gpus", ())] == row["frag_gpus"]
    assert scrape[("gpufrag_cluster_fragmentation_ratio", ())] == row["frag_ratio_pct"] / 100.0
    near = pytest.approx  # a sum of GPU figures in thousandths: equal up to float rounding
    assert summed(scrape, "gpufrag_gpus") == near(row["capacity_gpus"], abs=1e-9)
    idle = summed(scrape, "gpufrag_gpus", state="idle") + summed(
        scrape, "gpufrag_gpus", state="stranded"
    )
    assert idle == near(row["idle_gpus"], abs=1e-9)
    assert summed(scrape, "gpufrag_gpus", state="stranded") == near(row["stranded_gpus"], abs=1e-9)
    assert summed(scrape, "gpufrag_pending_unplaceable_pods") == row["unplaceable_pods"]
    stranded_signals = summed(scrape, "gpufrag_signals_open", kind="stranded_gpus")
    assert stranded_signals == row["stranded_nodes"]
