"""Rows as value tuples: the same values as the dict rows, in the DDL's column order, inserted
as columns by ``Store.insert_rows``."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from connectors.clickhouse import Store, StoreError
from connectors.clickhouse.row_values import (
    CLUSTER_COLUMNS,
    EVENT_COLUMNS,
    NODE_PROFILE_COLUMNS,
    TASK_PROFILE_COLUMNS,
    cluster_values,
    event_values,
    json_text,
    node_profile_values,
    task_profile_values,
)
from connectors.clickhouse.rows import event_row, task_profile_row
from models import to_json
from tests.connectors.clickhouse import factories as f
from tests.connectors.clickhouse.factories import SUMMARY

RUN = "run-1"
INGESTED = datetime.now(UTC).replace(microsecond=0)


def test_json_text_is_the_bus_bytes_of_the_model() -> None:
    models = [f.node_profile(), f.task_profile(), f.gpu_sample_env(3).payload, f.signal(1)]
    for model in models:
        assert json_text(model) == to_json(model).decode()
    assert json_text({"b": 1, "a": [2]}) == '{"a":[2],"b":1}'


@pytest.mark.parametrize(
    ("table", "columns"),
    [
        ("events", EVENT_COLUMNS),
        ("node_profiles", NODE_PROFILE_COLUMNS),
        ("task_profiles", TASK_PROFILE_COLUMNS),
        ("cluster_frag", CLUSTER_COLUMNS),
    ],
)
def test_columns_are_the_ddls_in_order(store: Store, table: str, columns: tuple[str, ...]) -> None:
    assert list(columns) == store.query(f"SELECT * FROM {table} LIMIT 0").columns


def test_value_tuples_go_in_as_columns_and_read_back_as_the_dict_rows(store: Store) -> None:
    envs = [f.gpu_sample_env(i) for i in range(3)]
    values = [event_values(RUN, env, ingested_at=INGESTED) for env in envs]
    assert store.insert_rows("events", EVENT_COLUMNS, values) == 3
    got = store.query("SELECT * FROM events ORDER BY id").dicts()
    rows = sorted((event_row(RUN, env, ingested_at=INGESTED) for env in envs), key=str)
    assert sorted(got, key=str) == rows

    gone = task_profile_values(RUN, "ml/job-1", None, at=f.at(9), seq=2)
    kept = task_profile_values(RUN, "ml/job-1", f.task_profile(), at=f.at(1), seq=0)
    store.insert_rows("task_profiles", TASK_PROFILE_COLUMNS, [kept, gone])
    got = store.query("SELECT * FROM task_profiles ORDER BY ts").dicts()
    assert got == [
        task_profile_row(RUN, "ml/job-1", f.task_profile(), at=f.at(1), seq=0),
        task_profile_row(RUN, "ml/job-1", None, at=f.at(9), seq=2),
    ]
    node = node_profile_values(RUN, "gpu-node-1", f.node_profile(), at=f.at(1), seq=0)
    store.insert_rows("node_profiles", NODE_PROFILE_COLUMNS, [node])
    store.insert_rows("cluster_frag", CLUSTER_COLUMNS, [cluster_values(RUN, SUMMARY, f.at(2))])
    (frag,) = store.query("SELECT frag_amount_pct, pending_pods FROM cluster_frag").rows
    assert tuple(frag) == (18.75, 1)


def test_a_row_of_another_width_is_refused_by_its_index(store: Store) -> None:
    good = event_values(RUN, f.gpu_sample_env(1), ingested_at=INGESTED)
    with pytest.raises(StoreError, match=r"row 2 has 8 values for 9 columns"):
        store.insert_rows("events", EVENT_COLUMNS, [good, good, good[:-1]])
    with pytest.raises(StoreError, match=r"row 0 has 10 values for 9 columns"):
        store.insert_rows("events", EVENT_COLUMNS, [(*good, 1)])
    assert store.query("SELECT count() FROM events").rows == [(0,)]


def test_dict_rows_with_their_keys_in_another_order_insert_alike(store: Store) -> None:
    row = event_row(RUN, f.gpu_sample_env(1), ingested_at=INGESTED)
    other = event_row(RUN, f.gpu_sample_env(2), ingested_at=INGESTED)
    store.insert("events", [row, dict(reversed(list(other.items())))])
    got = store.query("SELECT * FROM events ORDER BY id").dicts()
    assert sorted(got, key=str) == sorted([row, other], key=str)
