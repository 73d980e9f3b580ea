"""Fuzzed NVML readings: whatever a driver (or a broken binding) reports, the mapping either
makes a sample whose every value is inside ``models.bounds`` or refuses the card with a reason
naming the field; it never raises."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import TypeVar

from hypothesis import given
from hypothesis import strategies as st

from connectors.gpu.reading import NvmlReading, PodRef, ProcessUse, Refused, checked_sample
from models import Envelope, GpuSample, GpuSampleEvent, from_json, to_json
from models.bounds import GPU_INDEX_MAX, GPU_MEMORY_MIB_MAX, XID_CODE_MAX
from tests.fuzzing import fuzz

AT = datetime(2026, 3, 2, 9, 30, tzinfo=UTC)
T = TypeVar("T")
U64 = 2**64 - 1  # NVML's counters are unsigned 64-bit
EDGE_INTS = [0, 1, 63, 64, 255, 9999, 10_000, 2**31, 2**40, 2**50, 2**63, U64, 2**70, -1]
INTS = st.one_of(st.integers(0, U64), st.sampled_from(EDGE_INTS), st.integers(-(2**80), 2**80))
BYTES = st.one_of(st.none(), st.integers(0, 2**37), st.integers(0, 2**41))
PCT = st.one_of(st.none(), st.floats(0, 100))
WILD_PCT = st.floats(allow_nan=True, allow_infinity=True)
PODS = st.sampled_from(
    [PodRef("ns", "a", "c"), PodRef("ns", "a", "d"), PodRef("ns", "b"), PodRef("", "uid:x")]
)
FIELDS = set(GpuSample.model_fields)
# Built once, here: a strategy built inside the composite is validated again at every draw.
THREE_IN_FOUR = st.sampled_from([True, True, True, False])
INDEX, WILD_INDEX = st.integers(0, 8), st.one_of(st.integers(0, 70), INTS)
UUID = st.one_of(st.none(), st.sampled_from(["GPU-a", "GPU-b", ""]), st.text())
NAME = st.one_of(st.none(), st.text(max_size=30))
ECC = st.one_of(st.none(), INTS)
MIG_ENABLED = st.one_of(st.none(), st.booleans())
XID = st.one_of(st.none(), st.integers(0, 200))
PROCESSES = st.lists(st.tuples(st.integers(1, 9), BYTES), max_size=3)
MIG_UUIDS = st.lists(st.sampled_from(["MIG-1", "MIG-2"]), max_size=2)


def _mostly(draw: st.DrawFn, plausible: st.SearchStrategy[T], wild: st.SearchStrategy[T]) -> T:
    """A plausible value three times in four, so that samples are made about as often as
    cards are refused (``st.one_of`` leans to whichever branch has more distinct values)."""
    return draw(plausible if draw(THREE_IN_FOUR) else wild)


@st.composite
def readings(draw: st.DrawFn) -> NvmlReading:
    return NvmlReading(
        index=_mostly(draw, INDEX, WILD_INDEX),
        uuid=draw(UUID),
        name=draw(NAME),
        memory_total_bytes=_mostly(draw, BYTES, INTS),
        memory_used_bytes=_mostly(draw, BYTES, INTS),
        memory_reserved_bytes=_mostly(draw, BYTES, INTS),
        gpu_util_pct=_mostly(draw, PCT, WILD_PCT),
        memory_util_pct=_mostly(draw, PCT, WILD_PCT),
        ecc_uncorrected_volatile=draw(ECC),
        mig_enabled=draw(MIG_ENABLED),
        xid=_mostly(draw, XID, INTS),
        processes=tuple(ProcessUse(pid=p, used_bytes=u) for p, u in draw(PROCESSES)),
        mig_uuids=tuple(draw(MIG_UUIDS)),
    )


def _check(made: GpuSample | Refused, reading: NvmlReading) -> None:
    if isinstance(made, Refused):
        assert made.reason in ("out_of_range", "value")
        assert made.detail.startswith(f"GPU {reading.index}: ") and "\n" not in made.detail
        named = made.detail.split(": ", 2)[1].split(".")[0]
        assert named in FIELDS or named == "value", made.detail  # "value": used above total
        return
    assert GpuSample.model_validate(made.model_dump()) == made
    assert 0 <= made.gpu_index <= GPU_INDEX_MAX
    for mib in (made.memory_total_mib, made.memory_used_mib, made.memory_reserved_mib):
        assert mib is None or (math.isfinite(mib) and 0 <= mib <= GPU_MEMORY_MIB_MAX)
    assert made.utilization_pct is None or 0 <= made.utilization_pct <= 100
    assert made.xid is None or 0 <= made.xid <= XID_CODE_MAX
    env = Envelope.wrap(GpuSampleEvent(sample=made), event_time=AT, source="nvml")
    assert from_json(Envelope, to_json(env)) == env  # fits 64 bits and JSON


@fuzz
@given(
    reading=readings(),
    owners=st.dictionaries(st.integers(1, 9), st.one_of(st.none(), PODS), max_size=9),
    assigned=st.frozensets(PODS, max_size=3),
)
def test_any_reading_makes_a_bounded_sample_or_a_named_refusal(
    reading: NvmlReading, owners: dict[int, PodRef | None], assigned: frozenset[PodRef]
) -> None:
    made = checked_sample("gpu-node-1", reading, pod_of_pid=owners.get, assigned=assigned)
    _check(made, reading)
