"""Which records tell an actuator taking a partition over that an action was carried out
(``streams/app/sinks/carried_out.py``): outcome records with a final outcome, nothing else."""

from __future__ import annotations

import orjson
import pytest

from streams.app.sinks.carried_out import CarriedOut


@pytest.mark.parametrize(
    ("record", "carried_out"),
    [
        ({"id": "a1", "outcome": "executed", "mode": "enforce"}, True),
        ({"id": "a1", "outcome": "gone"}, True),
        # not final: the id may be tried again (the budget may allow it later)
        ({"id": "a1", "outcome": "blocked"}, False),
        ({"id": "a1", "outcome": "refused"}, False),
        ({"id": "a1", "outcome": "failed"}, False),
        ({"id": "a1", "outcome": "proposed"}, False),
        # a request, even one that names an outcome, says nothing was done
        ({"id": "a1", "op": "evict", "outcome": "executed"}, False),
        ({"id": 7, "outcome": "executed"}, False),
        (["a1", "executed"], False),
    ],
)
def test_only_final_outcome_records_count(record: object, carried_out: bool) -> None:
    seen = CarriedOut(limit=10)
    seen.note(orjson.dumps(record))
    assert ("a1" in seen) is carried_out


def test_unreadable_records_are_passed_over_and_the_oldest_ids_go_first() -> None:
    seen = CarriedOut(limit=2)
    seen.note(b"{broken")
    for n in (1, 2, 3):
        seen.note(orjson.dumps({"id": f"a{n}", "outcome": "executed"}))
    assert "a1" not in seen and "a2" in seen and "a3" in seen
    seen.note(orjson.dumps({"id": "a2", "outcome": "gone"}))  # seen again: newest now
    seen.note(orjson.dumps({"id": "a4", "outcome": "executed"}))
    assert "a2" in seen and "a3" not in seen and "a4" in seen
