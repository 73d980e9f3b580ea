"""Every XID in gpufrag's table, with the class it is in, and what a card with it is."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from models import GpuSample
from models.xid import XID_TABLE, XidClass, classify_xid
from streams.profiles.health import health_step

# Written out, not read from the table, so that a changed entry fails here.
EXPECTED = {
    13: XidClass.APPLICATION,
    31: XidClass.APPLICATION,
    32: XidClass.APPLICATION,
    43: XidClass.APPLICATION,
    45: XidClass.APPLICATION,
    48: XidClass.FATAL,
    61: XidClass.FATAL,
    62: XidClass.FATAL,
    63: XidClass.INFORMATIONAL,
    64: XidClass.FATAL,
    68: XidClass.APPLICATION,
    69: XidClass.APPLICATION,
    74: XidClass.FATAL,
    79: XidClass.FATAL,
    92: XidClass.INFORMATIONAL,
    94: XidClass.FATAL,
    95: XidClass.FATAL,
    109: XidClass.APPLICATION,
    119: XidClass.FATAL,
    120: XidClass.FATAL,
    121: XidClass.INFORMATIONAL,
    140: XidClass.FATAL,
    154: XidClass.FATAL,
}


def test_the_table_is_exactly_the_codes_tested_here() -> None:
    assert set(XID_TABLE) == set(EXPECTED)


@pytest.mark.parametrize(("code", "kind"), sorted(EXPECTED.items()))
def test_each_code_has_its_class_and_a_meaning(code: int, kind: XidClass) -> None:
    info = classify_xid(code)
    assert (info.code, info.kind) == (code, kind)
    assert info.meaning and info.meaning != "not in gpufrag's XID table"
    # a card reading a fatal XID is taken out; any other keeps serving
    at = datetime(2026, 1, 1, tzinfo=UTC)
    health = health_step(None, GpuSample(node="n", gpu_index=0, xid=code), at, recover_after_s=600)
    assert health.faulted == (kind is XidClass.FATAL)
    if health.faulted:
        assert (health.code, health.fault) == (code, f"XID {code}: {info.meaning}")


@pytest.mark.parametrize("code", [1, 999, 9_999])
def test_an_unknown_code_is_kept_and_labelled_unknown(code: int) -> None:
    info = classify_xid(code)
    assert (info.code, info.kind, info.takes_card_out) == (code, XidClass.UNKNOWN, False)
