"""A named query's parameters are taken as typed: ASCII numbers only, finite floats."""

from __future__ import annotations

import pytest

from streams.app.queries.named_queries import QueryError, bind, parse_query

QUERY = parse_query(
    "q",
    "-- param: limit UInt32 = 20\n-- param: offset Int64 = 0\n-- param: share Float64 = 0.5\n"
    "SELECT 1",
)


def bound(**given: str) -> dict[str, object]:
    return bind(QUERY, given, latest_run=lambda: None)


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ({"limit": "10"}, {"limit": 10}),
        ({"offset": "-3"}, {"offset": -3}),
        ({"share": "2.5e-1"}, {"share": 0.25}),
        ({"share": ".5"}, {"share": 0.5}),
    ],
    ids=["uint", "negative", "exponent", "leading_point"],
)
def test_ascii_numbers_are_taken(given: dict[str, str], expected: dict[str, object]) -> None:
    assert bound(**given).items() >= expected.items()


@pytest.mark.parametrize(
    ("given", "why"),
    [
        ({"limit": "\uff11\uff10"}, "use ASCII digits 0-9 only"),  # full-width 10: int() reads 10
        ({"limit": "\u0661\u0660"}, "use ASCII digits 0-9 only"),  # Arabic-Indic 10
        ({"limit": "1_000"}, "use ASCII digits 0-9 only"),
        ({"limit": " 10"}, "use ASCII digits 0-9 only"),
        ({"offset": "\uff11"}, "use ASCII digits 0-9 only"),
        ({"share": "\uff10.\uff15"}, "use ASCII digits"),
        ({"share": "nan"}, "use ASCII digits"),
        ({"share": "1e309"}, "must be finite"),
    ],
    ids=["full_width", "arabic_indic", "underscore", "blank", "int64", "float", "nan", "inf"],
)
def test_other_digits_and_non_finite_values_are_refused(given: dict[str, str], why: str) -> None:
    with pytest.raises(QueryError, match=why):
        bound(**given)
