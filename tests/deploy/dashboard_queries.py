"""The queries of the Grafana dashboard (deploy/helm/gpufrag/files/dashboards/gpufrag.json),
and Grafana's variables and macros replaced the way Grafana and the ClickHouse plugin would,
so promtool and chDB can judge them."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from tests.paths import REPO_ROOT

__all__ = [
    "CLICKHOUSE",
    "DASHBOARD",
    "PROMETHEUS",
    "Query",
    "as_promql",
    "as_sql",
    "load_dashboard",
    "promql_queries",
    "sql_queries",
]

DASHBOARD = REPO_ROOT / "deploy" / "helm" / "gpufrag" / "files" / "dashboards" / "gpufrag.json"
PROMETHEUS = {"type": "prometheus", "uid": "${datasource}"}
CLICKHOUSE = {"type": "grafana-clickhouse-datasource", "uid": "${clickhouse}"}

_LABEL_VALUES = re.compile(r"^label_values\((.*),\s*\w+\)$", re.S)
_VARIABLE = re.compile(r"\$\{(\w+)\}|\$(\w+)")


@dataclass(frozen=True)
class Query:
    where: str  # the panel title and refId, or the variable's name
    text: str


def load_dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return loaded


def _panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for panel in dashboard["panels"]:
        out.append(panel)
        out.extend(panel.get("panels", []))  # a collapsed row holds its panels
    return out


def promql_queries(dashboard: dict[str, Any]) -> list[Query]:
    """Every PromQL expression: the panels' targets and the variables' label_values(...)
    selectors."""
    found = [
        Query(f"{p['title']} {t['refId']}", t["expr"])
        for p in _panels(dashboard)
        for t in p.get("targets", [])
        if t.get("datasource") == PROMETHEUS
    ]
    for var in dashboard["templating"]["list"]:
        if var["type"] == "query" and var["datasource"] == PROMETHEUS:
            match = _LABEL_VALUES.match(var["query"]["query"])
            assert match, f"variable {var['name']}: not label_values(SELECTOR, LABEL)"
            found.append(Query(f"variable {var['name']}", match.group(1)))
    return found


def sql_queries(dashboard: dict[str, Any]) -> list[Query]:
    """Every ClickHouse query: the panels' targets and the variables' queries."""
    found = [
        Query(f"{p['title']} {t['refId']}", t["rawSql"])
        for p in _panels(dashboard)
        for t in p.get("targets", [])
        if t.get("datasource") == CLICKHOUSE
    ]
    found += [
        Query(f"variable {v['name']}", v["query"])
        for v in dashboard["templating"]["list"]
        if v["type"] == "query" and v["datasource"] == CLICKHOUSE
    ]
    return found


def as_promql(expr: str) -> str:
    """Grafana's interval variables as a duration, a template variable as the regex that
    matches every value (what 'All' sends with allValue `.*`)."""
    for name in ("$__rate_interval", "$__interval", "$__range"):
        expr = expr.replace(name, "5m")
    return _VARIABLE.sub(".*", expr)


def as_sql(text: str, *, values: dict[str, str], start_s: int, end_s: int) -> str:
    """The ClickHouse plugin's macros as it expands them, over the range [start_s, end_s],
    and the template variables from `values`."""
    text = re.sub(
        r"\$__timeFilter\((\w+)\)",
        rf"\1 >= toDateTime({start_s}) AND \1 <= toDateTime({end_s})",
        text,
    )
    text = re.sub(
        r"\$__timeInterval\((\w+)\)",
        r"toStartOfInterval(toDateTime(\1), INTERVAL 60 second)",
        text,
    )
    text = text.replace("$__interval_s", "60")

    def value(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        if name not in values:
            raise AssertionError(f"no value for ${name} in {text!r}")
        return values[name]

    return _VARIABLE.sub(value, text)
