"""DCGM's sentinels, as dcgm_structs.h defines them, never pass for measurements."""

from __future__ import annotations

import math

import pytest

from connectors.dcgm.blanks import (
    DCGM_FP64_BLANK,
    DCGM_INT32_BLANK,
    DCGM_INT64_BLANK,
    blank_kind,
    is_blank,
)


def test_constants_are_the_ones_in_dcgm_structs_h() -> None:
    assert DCGM_INT32_BLANK == 0x7FFFFFF0 == 2147483632
    assert DCGM_INT64_BLANK == 0x7FFFFFFFFFFFFFF0 == 9223372036854775792
    assert DCGM_FP64_BLANK == 140737488355328.0 == 2.0**47


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        (2147483632, "blank"),
        (2147483633, "not found"),
        (2147483634, "not supported"),
        (2147483635, "not permissioned"),
        (9223372036854775792, "blank"),
        (9223372036854775794, "not supported"),  # as the exporter's README shows it
        (9223372036854775795, "not permissioned"),
        (140737488355328.0, "blank"),
        (140737488355330.0, "not supported"),
        (140737488355331.0, "not permissioned"),
        (math.nan, "NaN"),
        (2147483647, "blank"),  # DCGM_INT32_IS_BLANK: anything from the blank up
        (9.3e18, "blank"),
    ],
)
def test_sentinels_are_blank(value: float, kind: str) -> None:
    assert is_blank(value)
    assert blank_kind(value) == kind


@pytest.mark.parametrize("value", [0, 1, 97.5, 143771, 2147483631, 140737488355327.0, 2**40])
def test_real_values_are_not(value: float) -> None:
    assert not is_blank(value)
    assert blank_kind(value) is None
