"""Hypothesis strategies for a GPU node in any sharing mode and the requests of pods bound to
it: shared by the card-layout and capacity-index properties."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import strategies as st

from models import Node, ResourceRequest
from models.cards import SharingMode

__all__ = ["PROFILES", "T0", "nodes", "requests"]

T0 = datetime(2026, 12, 2, tzinfo=UTC)
PROFILES = ("1g.10gb", "2g.20gb", "3g.40gb", "7g.80gb")


@st.composite
def nodes(draw: st.DrawFn) -> Node:
    mode = draw(st.sampled_from(list(SharingMode)))
    model = draw(st.sampled_from(["A100-80GB", "A30", "H100"]))
    fitting = PROFILES[:3] if model == "A30" else PROFILES
    mig = (
        draw(st.dictionaries(st.sampled_from(fitting), st.integers(1, 4), max_size=3))
        if mode is SharingMode.MIG
        else {}
    )
    cards = 0 if mode is SharingMode.MIG else draw(st.integers(1, 4))
    return Node(
        name="n",
        cpu_milli=64_000,
        memory_mib=262_144,
        gpu_model=model,
        gpu_count=cards,
        gpu_memory_mib=draw(st.sampled_from([None, 24_576, 81_920]))
        if mode is SharingMode.HAMI
        else None,
        gpu_replicas=draw(st.integers(2, 8))
        if mode in (SharingMode.TIME_SLICED, SharingMode.HAMI)
        else 1,
        gpu_sharing=None if mode is SharingMode.MIG else mode,
        mig_devices=mig or ({"1g.10gb": 1} if mode is SharingMode.MIG else {}),
    )


@st.composite
def requests(draw: st.DrawFn) -> ResourceRequest:
    count = draw(st.integers(0, 3))
    milli = 0 if count == 0 else (draw(st.integers(1, 1000)) if count == 1 else 1000)
    return ResourceRequest(
        cpu_milli=100,
        memory_mib=100,
        gpu_count=count,
        gpu_milli=milli,
        mig=draw(st.dictionaries(st.sampled_from(PROFILES), st.integers(1, 3), max_size=2)),
        gpu_memory_mib=draw(st.none() | st.integers(1, 90_000)) if count else None,
        gpu_cores_pct=draw(st.none() | st.integers(0, 100)) if count else None,
    )
