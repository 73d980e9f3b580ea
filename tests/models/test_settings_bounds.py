"""The settings model refuses what would hang, overflow or be ignored: buffers below a batch,
infinite or huge numbers, variables that name no setting."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from models import GpufragSettings, StoreSettings
from models.settings_env import NOT_SETTINGS, nearest_setting, unknown_names, unreadable_json


def refused(monkeypatch: pytest.MonkeyPatch, name: str, value: str) -> ValidationError:
    monkeypatch.setenv(name, value)
    with pytest.raises(ValidationError) as caught:
        GpufragSettings()
    return caught.value


def test_a_buffer_smaller_than_a_batch_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    # 20 buffered rows stored about 20 rows a second, and a replay looked hung (issue 32, C7)
    err = refused(monkeypatch, "GPUFRAG_STORE__MAX_BUFFERED_ROWS", "20")
    assert [e["loc"] for e in err.errors()] == [("store", "max_buffered_rows")]
    with pytest.raises(ValidationError, match=r"must be at least batch_rows \(5000\)"):
        StoreSettings(max_buffered_rows=2000)
    assert StoreSettings(batch_rows=1000, max_buffered_rows=1000).max_buffered_rows == 1000


@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "1e309", "Infinity"])
@pytest.mark.parametrize(
    "name",
    [
        "GPUFRAG_DETECTORS__UNPLACEABLE_PENDING__EVALUATE_EVERY_S",
        "GPUFRAG_STORE__FLUSH_INTERVAL_S",
        "GPUFRAG_ANALYSIS__COVERAGE",
        "GPUFRAG_KUBE__REQUEST_TIMEOUT_S",
        "GPUFRAG_DETECTORS__FRAGMENTATION__MIN_IDLE_GPUS",
        "GPUFRAG_GUARDRAILS__COOLDOWN_POD_S",
        "GPUFRAG_WATCH__ALLOWED_DELAY_S",
    ],
    ids=lambda n: n.removeprefix("GPUFRAG_").lower(),
)
def test_no_float_setting_takes_infinity_or_nan(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    err = refused(monkeypatch, name, value)
    loc = tuple(name.removeprefix("GPUFRAG_").lower().split("__"))
    assert [e["loc"] for e in err.errors()] == [loc]


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("GPUFRAG_DETECTORS__UNPLACEABLE_PENDING__EVALUATE_EVERY_S", "1e12"),  # past year 9999
        ("GPUFRAG_ANALYSIS__TYPICAL_REFRESH_S", "1e300"),
        ("GPUFRAG_STORE__BATCH_ROWS", "100000000000"),
        ("GPUFRAG_STORE__MAX_BUFFERED_ROWS", "100000000000"),
        ("GPUFRAG_TRACE__MAX_LINE_BYTES", "1000000000000"),  # read(n) allocates n bytes
        ("GPUFRAG_DCGM__MAX_PAGE_BYTES", "1000000000000"),
        ("GPUFRAG_KUBE__PAGE_SIZE", "1" + "0" * 20),  # past 64 bits
    ],
    ids=[
        "evaluate_every_s",
        "typical_refresh_s",
        "batch_rows",
        "max_buffered_rows",
        "max_line_bytes",
        "max_page_bytes",
        "page_size",
    ],
)
def test_huge_values_are_refused(monkeypatch: pytest.MonkeyPatch, name: str, value: str) -> None:
    err = refused(monkeypatch, name, value)
    assert len(err.errors()) == 1


@pytest.mark.parametrize(
    ("name", "nearest"),
    [
        ("GPUFRAG_STORE_BATCH_ROWS", "GPUFRAG_STORE__BATCH_ROWS"),
        ("GPUFRAG_DETECTOR__FRAGMENTATION__ENABLED", "GPUFRAG_DETECTORS__FRAGMENTATION__ENABLED"),
        ("GPUFRAG_STORES", "GPUFRAG_STORE"),
        ("GPUFRAG_NOPE", None),
    ],
    ids=["one_underscore", "group_typo", "plural", "nothing_close"],
)
def test_unknown_top_level_names_are_refused_with_the_nearest_setting(
    monkeypatch: pytest.MonkeyPatch, name: str, nearest: str | None
) -> None:
    err = refused(monkeypatch, name, "1")
    assert [(e["type"], e["loc"]) for e in err.errors()] == [
        ("extra_forbidden", (name.removeprefix("GPUFRAG_").lower(),))
    ]
    assert nearest_setting(GpufragSettings, name) == nearest


def test_a_setting_moved_to_another_group_is_found_by_its_name() -> None:
    assert (
        nearest_setting(GpufragSettings, "GPUFRAG_ANALYSIS__EVALUATE_EVERY_S")
        == "GPUFRAG_DETECTORS__UNPLACEABLE_PENDING__EVALUATE_EVERY_S"
    )


def test_unknown_names_keep_the_other_problems(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUFRAG_DETECTORS__FRAGMENTATION__RATIO_OPEN_PCT", "200")
    monkeypatch.setenv("GPUFRAG_STORE__MAX_BUFFERED_ROWS", "1000")  # below the batch: a ctx
    err = refused(monkeypatch, "GPUFRAG_NOPE", "1")
    assert [e["loc"] for e in err.errors()] == [
        ("nope",),
        ("detectors", "fragmentation", "ratio_open_pct"),
        ("store",),
    ]


def test_names_that_are_not_settings_are_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    environ = {name: "x" for name in NOT_SETTINGS}
    environ |= {"GPUFRAG_STORE__DSN": "chdb:///tmp/s", "gpufrag_kube__namespace": "a", "HOME": "/"}
    assert unknown_names(GpufragSettings, environ) == []
    for name in NOT_SETTINGS:
        monkeypatch.setenv(name, "x")
    assert GpufragSettings().store.batch_rows == 5000


def test_the_variable_that_is_not_json_is_named() -> None:
    environ = {
        "GPUFRAG_KUBE__NAMESPACE": "not json and not meant to be",
        "GPUFRAG_KUBE__RESOURCES": "9" * 5000,
    }
    found = unreadable_json(GpufragSettings, "kube", environ)
    assert found is not None and found[0] == "GPUFRAG_KUBE__RESOURCES"
    assert unreadable_json(GpufragSettings, "store", {"GPUFRAG_STORE": "notjson"}) == (
        "GPUFRAG_STORE",
        "Expecting value",
    )
