"""Fuzzing the envelope decode edge (what the workers and `gpufrag sink` read off Kafka).

Each example is a valid envelope with one to three of its JSON leaves (or whole sub-objects)
replaced by something hostile: integers past 64 bits, negatives, huge floats, wrong types,
times outside any clock. The invariant: decode either refuses it with a ``ValueError`` (the
stage dead-letters it with the reason) or returns an envelope whose every value is in range:
it serializes (orjson needs 64-bit integers), reads back equal, and builds its store rows.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from connectors.clickhouse.rows import event_row, gpu_sample_row
from models import Envelope, EventKind, from_json, to_json
from models.bounds import TIME_MAX, TIME_MIN
from streams.distributed.codec import decode_input, describe_error
from tests.fuzzing import fuzz, json_leaves
from tests.models.strategies import st_envelope

HOSTILE: st.SearchStrategy[Any] = st.one_of(
    st.integers(min_value=-(2**80), max_value=2**80),
    st.sampled_from([2**63, 2**64, -1, -(2**63) - 1, 10**30, 4_096_001, 65, 1001, 0]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
    st.none(),
    st.booleans(),
    # a fresh container each draw: st.just([]) hands out one shared list, which later
    # changes could write into until it contained itself ("Circular reference detected")
    st.builds(list),
    st.builds(dict),
    st.sampled_from(
        [
            "0001-01-01T00:00:00+01:00",
            "9999-12-31T23:59:59-14:00",
            "1969-12-31T23:59:59Z",
            "2262-04-12T00:00:00Z",
            "2026-01-01T00:00:00",  # naive
            "1700000000",
        ]
    ),
)


def _get(data: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        data = data[step]
    return data


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _set(data: Any, path: tuple[Any, ...], new: Any) -> None:
    for step in path[:-1]:
        data = data[step]
    data[path[-1]] = new


@st.composite
def st_hostile_envelope(draw: st.DrawFn) -> bytes:
    data = draw(st_envelope()).model_dump(mode="json")
    paths = list(json_leaves(data))
    # numbers are where the bounds are: most changes go to a numeric leaf
    numeric = [p for p in paths if _is_number(_get(data, p))] or paths
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        path = draw(st.sampled_from(numeric if draw(st.integers(0, 9)) < 7 else paths))
        value = draw(HOSTILE)
        # an earlier change may have removed the parent
        with contextlib.suppress(KeyError, IndexError, TypeError):
            _set(data, path, value)
    # the standard library writes integers of any size, as a hostile producer could
    return json.dumps(data).encode()


def _every_int_and_time(value: Any) -> Iterator[Any]:
    if isinstance(value, dict):
        for v in value.values():
            yield from _every_int_and_time(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _every_int_and_time(v)
    elif isinstance(value, int | datetime):
        yield value


@fuzz
@given(raw=st_hostile_envelope())
def test_decode_refuses_with_a_reason_or_returns_only_values_in_range(raw: bytes) -> None:
    try:
        env = decode_input(raw)
    except ValueError as exc:  # ValidationError, DecodeError, JSONDecodeError
        assert describe_error(exc)  # the dead letter's reason: one line, never empty
        assert "\n" not in describe_error(exc)
        return
    assert isinstance(env, Envelope)
    for value in _every_int_and_time(env.model_dump()):
        if isinstance(value, datetime):
            assert TIME_MIN <= value <= TIME_MAX
        elif not isinstance(value, bool):
            assert -(2**63) <= value < 2**63
    data = to_json(env)
    assert from_json(Envelope, data) == env
    event_row("fuzz", env, ingested_at=datetime.now(UTC))
    if env.kind is EventKind.GPU_SAMPLE:
        gpu_sample_row("fuzz", env)
