"""``models.trusted``: a model of values valid already, equal to the validated one, and refused
when a field is missing or unknown (a missing field would otherwise read as an AttributeError
far from where it was left out)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from models import GpuState, NodeProfile, to_json, trusted


def test_a_trusted_model_equals_and_dumps_as_the_validated_one() -> None:
    values = GpuState(index=2, milli_free=500, memory_total_mib=81_920.0).model_dump()
    made = trusted(GpuState, dict(values))
    assert made == GpuState.model_validate(values)
    assert to_json(made) == to_json(GpuState.model_validate(values))
    assert made.free_units == 500


def test_a_missing_or_unknown_field_is_refused_by_name() -> None:
    at = datetime(2026, 1, 1, tzinfo=UTC)
    values = dict(
        NodeProfile(name="n1", cpu_milli_allocatable=1, memory_mib_allocatable=1, updated_at=at)
    )
    del values["pool"]
    with pytest.raises(TypeError, match=r"\['pool'\]"):
        trusted(NodeProfile, values)
    with pytest.raises(TypeError, match="colour"):
        trusted(NodeProfile, {**values, "pool": None, "colour": "red"})
