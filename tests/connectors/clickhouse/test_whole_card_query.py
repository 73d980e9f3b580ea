"""The named query top_whole_card_holders on real rows in chDB: each whole-card holder with its
card-hours and the verdict its readings give, underused holders first."""

from __future__ import annotations

from connectors.clickhouse import Store
from connectors.clickhouse.rows import gpu_sample_row, task_profile_row
from models import Envelope, GpuSample, GpuSampleEvent, PodPhase, ResourceRequest, TaskProfile
from streams.app.queries.named_queries import bind, load_queries
from tests.connectors.clickhouse.factories import T0, at
from tests.paths import REPO_ROOT

RUN = "run-cards"


def held(key: str, *, cards: int = 1, milli: int = 1000) -> TaskProfile:
    return TaskProfile(
        key=key,
        uid=key,
        requests=ResourceRequest(cpu_milli=1000, memory_mib=1024, gpu_count=cards, gpu_milli=milli),
        phase=PodPhase.RUNNING,
        node="n1",
        created_at=T0,
    )


def reading(key: str, gpu: int, s: float, mib: float, active: float | None) -> Envelope:
    ns, name = key.split("/")
    sample = GpuSample(
        node="n1",
        gpu_index=gpu,
        memory_total_mib=80_000.0,
        memory_used_mib=mib,
        engine_active=active,
        namespace=ns,
        pod=name,
    )
    return Envelope.wrap(GpuSampleEvent(sample=sample), event_time=at(s), source="dcgm")


def test_holders_get_card_hours_and_a_verdict_from_memory_and_activity(store: Store) -> None:
    pods = {
        "ml/train": held("ml/train", cards=2),  # busy: 95 % active
        "nb/small": held("nb/small"),  # 10 % of the memory, 3 % active
        "nb/idle": held("nb/idle"),  # 60 GB parked, 0.2 % active
        "nb/unseen": held("nb/unseen"),  # no readings: unknown, not idle
        "nb/brief": held("nb/brief"),
        "nb/blind": held("nb/blind"),
        "web/share": held("web/share", milli=500),  # half a card: not a whole-card holder
    }
    store.insert(
        "task_profiles",
        [task_profile_row(RUN, k, t, at=at(0), seq=i) for i, (k, t) in enumerate(pods.items())],
    )
    store.insert("task_profiles", [task_profile_row(RUN, "ml/train", None, at=at(7_200), seq=99)])
    readings = [
        reading("ml/train", 0, 60, 70_000, 0.95),
        reading("ml/train", 1, 60, 70_000, 0.90),
        reading("ml/train", 0, 3_660, 70_000, 0.95),
        reading("nb/small", 2, 60, 6_000, 0.01),
        reading("nb/small", 2, 1_860, 8_000, 0.03),
        reading("nb/idle", 3, 60, 60_000, 0.002),
        reading("nb/idle", 3, 1_860, 60_000, 0.002),
        reading("nb/brief", 5, 60, 1_000, 0.0),  # one reading: too short to say
        reading("nb/blind", 6, 60, 1_000, None),  # memory only: no activity figure
        reading("nb/blind", 6, 1_860, 1_000, None),
        reading("web/share", 4, 60, 1_000, 0.0),
    ]
    store.insert("gpu_samples", [gpu_sample_row(RUN, env) for env in readings])
    store.insert(
        "task_profiles",
        [task_profile_row(RUN, "nb/unseen", pods["nb/unseen"], at=at(10_800), seq=100)],
    )

    query = load_queries(REPO_ROOT / "sql" / "queries")["top_whole_card_holders"]
    params = bind(query, {"run_id": RUN}, latest_run=lambda: None)
    result = store.query(query.sql, params)
    rows = result.dicts()
    got = {r["pod"]: (r["verdict"], r["cards"], r["card_hours"]) for r in rows}
    assert got == {
        "nb/idle": ("idle", 1, 3.0),  # bound at 0 s, the run ends at 10,800 s
        "nb/small": ("small_work", 1, 3.0),
        "ml/train": ("busy", 2, 4.0),  # two cards for the 7,200 s until it was removed
        "nb/unseen": ("no_samples", 1, 3.0),
        "nb/brief": ("short", 1, 3.0),
        "nb/blind": ("no_activity", 1, 3.0),
    }
    assert [r["pod"] for r in rows][:2] == ["nb/idle", "nb/small"]  # underused first
    small = next(r for r in rows if r["pod"] == "nb/small")
    assert (small["peak_memory_pct"], small["mean_activity_pct"], small["peak_activity_pct"]) == (
        10.0,
        2.0,
        3.0,
    )
    assert next(r for r in rows if r["pod"] == "nb/unseen")["peak_memory_pct"] is None
    # a stricter bar: 10 % of the memory is no longer small
    strict = bind(query, {"run_id": RUN, "memory_pct": "5"}, latest_run=lambda: None)
    again = store.query(query.sql, strict)
    verdicts = {r[1]: r[-1] for r in again.rows}
    assert verdicts["nb/small"] == "busy"
