"""The metric names the alert rules and the dashboard may use: the metrics contract, kept here
in one place, and how to find a name in the product's source."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from tests.paths import REPO_ROOT

__all__ = ["CONTRACT", "EXPORTED", "defined_in_source", "metric_names"]

CONTRACT = frozenset(
    {
        # the domain metrics
        "gpufrag_cluster_fragmentation_gpus",
        "gpufrag_cluster_fragmentation_ratio",
        "gpufrag_gpus",
        "gpufrag_pending_unplaceable_pods",
        "gpufrag_signals_open",
        "gpufrag_oom_storms_open",
        "gpufrag_oom_storm_kills",
        "gpufrag_idle_whole_gpus",
        "gpufrag_actions_total",
        "gpufrag_guardrail_refusals_total",
        "gpufrag_circuit_breaker_open",
        # kept from before
        "gpufrag_alerts_sent_total",
        "gpufrag_alerts_failed_posts_total",
        "gpufrag_alerts_dead_lettered_total",
        "gpufrag_stage_lag_seconds",
        "gpufrag_sink_rows_dead_lettered_total",
        "gpufrag_kube_last_success_timestamp_seconds",
        "gpufrag_sink_last_success_timestamp_seconds",
        # renamed
        "gpufrag_dcgm_last_success_timestamp_seconds",
        "gpufrag_stage_queue_items",
    }
)
"""The names the metrics part implements exactly (the issue's METRIC NAMES)."""

EXPORTED = CONTRACT | {
    "gpufrag_kube_resource_missing",  # connectors/kube/watch/watch_metrics.py
    "gpufrag_stage_events_in_total",  # streams/runner/embedded.py
    "gpufrag_sink_rows_written_total",  # connectors/clickhouse/sink_metrics.py
}
"""The contract and the few older metrics beside it that the rules and the dashboard read."""

SOURCE_ROOTS = ("models", "connectors", "streams")

# After label matchers, strings and range/offset durations are gone, an identifier that is
# not a function call, a keyword or a label list is a metric name.
_MATCHERS = re.compile(r"\{[^}]*\}")
_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"')
_DURATIONS = re.compile(r"\[[^\]]*\]")
_LABEL_LISTS = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_IDENTIFIER = re.compile(r"\b([a-zA-Z_:][a-zA-Z0-9_:]*)\b(\s*\()?")
_KEYWORDS = frozenset(
    {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "inf", "nan"}
)


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads (for the expressions this repository
    writes: no `@` modifiers or subqueries with labels inside brackets)."""
    text = _STRINGS.sub('""', expr)
    text = _LABEL_LISTS.sub(" ", _DURATIONS.sub(" ", _MATCHERS.sub(" ", text)))
    names = set()
    for match in _IDENTIFIER.finditer(text):
        word, call = match.group(1), match.group(2)
        if call or word.lower() in _KEYWORDS or re.fullmatch(r"\d\w*", word):
            continue
        names.add(word)
    return names


@cache
def _source_text() -> str:
    files = [p for root in SOURCE_ROOTS for p in sorted((REPO_ROOT / root).rglob("*.py"))]
    return "\n".join(Path(p).read_text(encoding="utf-8") for p in files)


def defined_in_source(name: str) -> bool:
    """Whether the product names the family in a string: a counter may be declared with or
    without its `_total` (prometheus_client adds it)."""
    text = _source_text()
    forms = {name, name.removesuffix("_total")}
    return any(f'"{form}"' in text for form in forms)
