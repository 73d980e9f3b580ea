"""The Grafana dashboard (deploy/helm/gpufrag/files/dashboards/gpufrag.json): its PromQL
parses (promtool, through a rule file with one recording rule per expression) and reads only
metrics gpufrag exports, every metric of the contract has a panel, and every ClickHouse query
returns rows from a store a replay filled."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from connectors.clickhouse.store import Store
from tests.app.pipeline_helpers import dsn_for, gpufrag, store_at
from tests.deploy.dashboard_queries import (
    CLICKHOUSE,
    PROMETHEUS,
    as_promql,
    as_sql,
    load_dashboard,
    promql_queries,
    sql_queries,
)
from tests.deploy.metric_names import CONTRACT, EXPORTED, defined_in_source, metric_names
from tests.deploy.promtool import promtool

pytestmark = pytest.mark.deploy

REPLAY = ("replay", "--node-limit", "60", "--actions", "dry-run", "--inject-oom-storms", "2")
"""60 nodes: the run has every table the panels read (signals of four kinds, dry-run actions,
OOM storms) in about 15 s."""


def _check_rules(tmp_path: Path, exprs: list[str]) -> tuple[int, str]:
    rules = {
        "groups": [
            {
                "name": "dashboard",
                "rules": [
                    {"record": f"gpufrag_dashboard:expr_{i}", "expr": e}
                    for i, e in enumerate(exprs)
                ],
            }
        ]
    }
    path = tmp_path / "dashboard-rules.yaml"
    path.write_text(yaml.safe_dump(rules), encoding="utf-8")
    result = promtool("check", "rules", path)
    return result.returncode, result.stdout + result.stderr


def test_the_dashboard_is_wired_to_its_two_data_sources() -> None:
    dashboard = load_dashboard()
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["query"] == "prometheus"
    assert variables["clickhouse"]["query"] == "grafana-clickhouse-datasource"
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        for target in panel.get("targets", []):
            assert target["datasource"] in (PROMETHEUS, CLICKHOUSE), panel["title"]
    assert len(promql_queries(dashboard)) >= 20
    assert len(sql_queries(dashboard)) >= 8


def test_every_promql_expression_parses(tmp_path: Path) -> None:
    queries = promql_queries(load_dashboard())
    exprs = [as_promql(q.text) for q in queries]
    assert not [e for e in exprs if "$" in e], "a Grafana variable left unreplaced"
    status, output = _check_rules(tmp_path, exprs)
    assert status == 0, output
    assert f"SUCCESS: {len(exprs)} rules found" in output


def test_promtool_refuses_a_broken_expression(tmp_path: Path) -> None:
    status, output = _check_rules(tmp_path, ["sum(gpufrag_gpus", 'gpufrag_gpus{state="idle"}'])
    assert status != 0, output
    assert '"gpufrag_dashboard:expr_0": could not parse expression' in output, output


def test_the_dashboard_reads_only_metrics_gpufrag_exports() -> None:
    names = {n for q in promql_queries(load_dashboard()) for n in metric_names(q.text)}
    assert names <= EXPORTED, f"not exported by gpufrag: {sorted(names - EXPORTED)}"
    missing = sorted(n for n in names if not defined_in_source(n))
    assert not missing, f"not defined in models/, connectors/ or streams/: {missing}"
    unused = sorted(CONTRACT - names)
    assert not unused, f"metrics of the contract without a panel: {unused}"


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Store, str]]:
    dsn = dsn_for(tmp_path_factory.mktemp("dashboard") / "store")
    result = gpufrag(dsn, *REPLAY, "--json")
    assert result.returncode == 0, result.stderr[-2000:]
    with store_at(dsn) as store:
        rows = store.query("SELECT run_id FROM runs FINAL WHERE status = 'finished'").rows
        assert len(rows) == 1
        yield store, str(rows[0][0])


def test_every_sql_query_returns_rows_from_a_replayed_run(replayed: tuple[Store, str]) -> None:
    store, run = replayed
    first, last = store.query(
        "SELECT toUnixTimestamp(min(ts)), toUnixTimestamp(max(ts)) FROM cluster_frag "
        "WHERE run_id = {run:String}",
        {"run": run},
    ).rows[0]
    # the run's own event-time span, as the time range a user sets to look at a replay
    values = {"database": "gpufrag", "run": run}
    empty = []
    for query in sql_queries(load_dashboard()):
        sql = as_sql(query.text, values=values, start_s=int(first), end_s=math.ceil(last) + 1)
        if not store.query(sql).rows:
            empty.append(query.where)
    assert not empty, f"no rows: {empty}"


def test_a_time_range_outside_the_run_leaves_the_time_series_empty(
    replayed: tuple[Store, str],
) -> None:
    # the macros are really applied: an hour before the run, the filtered panels return nothing
    store, run = replayed
    first = int(store.query("SELECT toUnixTimestamp(min(ts)) FROM cluster_frag").rows[0][0])
    filtered = [q for q in sql_queries(load_dashboard()) if "$__timeFilter" in q.text]
    assert len(filtered) >= 3
    values = {"database": "gpufrag", "run": run}
    for query in filtered:
        sql = as_sql(query.text, values=values, start_s=first - 7200, end_s=first - 3600)
        assert store.query(sql).rows == [], query.where
