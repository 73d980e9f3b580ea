"""The harness's arithmetic: medians, ratios, targets met or missed, the JSON object."""

from __future__ import annotations

import pytest

from streams.app.bench.figures import Figure, Goal, Samples, not_run
from streams.app.bench.report import number
from tests.bench.figure_keys import FIGURE_KEYS


def test_samples_give_the_median_and_the_range_whatever_their_order() -> None:
    s = Samples((3.0, 1.0, 2.0, 10.0))
    assert (s.median, s.low, s.high) == (2.5, 1.0, 10.0)
    assert Samples((5.0, 1.0, 3.0)).median == 3.0


def test_a_figure_without_runs_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one run"):
        Samples(())


def test_the_ratio_is_the_median_over_the_baselines_median() -> None:
    f = Figure(
        case="x",
        name="wall_s",
        unit="s",
        samples=Samples((2.0, 3.0, 4.0)),
        baseline="b",
        baseline_samples=Samples((1.0, 2.0, 100.0)),
    )
    assert f.ratio == 1.5
    assert Figure(case="x", name="y_s", unit="s", samples=Samples((1.0,))).ratio is None


@pytest.mark.parametrize(
    ("target", "median", "met"),
    [
        (Goal(0.35), 0.35, True),
        (Goal(0.35), 0.36, False),
        (Goal(50_000, at_most=False), 50_000.0, True),
        (Goal(50_000, at_most=False), 49_999.0, False),
    ],
)
def test_a_target_on_the_median(target: Goal, median: float, met: bool) -> None:
    f = Figure(case="x", name="y", unit="s", samples=Samples((median,)), targets=(target,))
    assert f.met is met


def test_a_target_on_the_ratio_reads_the_ratio_not_the_median() -> None:
    # median 9 s, baseline 6 s: ratio 1.5, the bound itself
    f = Figure(
        case="replay",
        name="wall_s",
        unit="s",
        samples=Samples((9.0,)),
        baseline="experiment",
        baseline_samples=Samples((6.0,)),
        targets=(Goal(1.5, of="ratio"),),
    )
    assert f.met is True
    slower = Figure(
        case="replay",
        name="wall_s",
        unit="s",
        samples=Samples((9.1,)),
        baseline="experiment",
        baseline_samples=Samples((6.0,)),
        targets=(Goal(1.5, of="ratio"),),
    )
    assert slower.met is False
    assert slower.target == "<= 1.5x baseline"


def test_every_target_must_hold() -> None:
    f = Figure(
        case="inspect",
        name="wall_s",
        unit="s",
        samples=Samples((1.5,)),
        baseline="json.load",
        baseline_samples=Samples((0.1,)),
        targets=(Goal(2.0), Goal(3.0, of="ratio")),
    )
    assert f.met is False  # within 2 s, but 15x the baseline
    assert f.target == "<= 2 s and <= 3x baseline"


def test_met_is_unknown_without_targets_or_without_a_baseline_for_a_ratio_target() -> None:
    assert Figure(case="x", name="y", unit="s", samples=Samples((1.0,))).met is None
    no_base = Figure(
        case="x",
        name="y",
        unit="s",
        samples=Samples((1.0,)),
        targets=(Goal(0.8, at_most=False, of="ratio"),),
    )
    assert no_base.met is None


def test_the_json_object_of_a_measured_figure() -> None:
    f = Figure(
        case="sink",
        name="rows_per_s",
        unit="rows/s",
        samples=Samples((80.0, 90.0, 70.0)),
        baseline="bulk",
        baseline_samples=Samples((100.0,)),
        targets=(Goal(0.8, at_most=False, of="ratio"),),
        params={"rows": 10},
    )
    body = f.as_json()
    assert set(body) == FIGURE_KEYS
    assert body["median"] == 80.0 and body["min"] == 70.0 and body["max"] == 90.0
    assert body["runs"] == 3 and body["baseline_median"] == 100.0
    assert body["ratio"] == 0.8 and body["met"] is True and body["target"] == ">= 0.8x baseline"


def test_a_figure_not_run_says_why_and_has_no_verdict() -> None:
    body = not_run(
        "kafka",
        "events_per_s",
        "events/s",
        "no broker given",
        targets=(Goal(20_000, at_most=False),),
    ).as_json()
    assert set(body) == FIGURE_KEYS
    assert body["median"] is None and body["runs"] == 0 and body["met"] is None
    assert body["note"] == "not run: no broker given"
    assert body["target"] == ">= 20000 events/s"


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, "-"),
        (0.0, "0"),
        (0.07123, "0.0712"),
        (34.61, "34.6"),
        (1422.4, "1,420"),
        (92083.0, "92,100"),
    ],
)
def test_numbers_are_printed_to_three_significant_digits(value: float | None, text: str) -> None:
    assert number(value) == text
