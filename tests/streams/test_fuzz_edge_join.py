"""Fuzzing the edge and what the join builds behind it without validating again.

The pipeline validates once, where bytes become an envelope (``models.from_json``); inside, the
join builds its hot records (each card's state, the node profile) with ``models.trusted``. Each
example is a sequence of valid events over a small cluster (nodes, pods, GPU samples, scheduler
events) with some JSON leaves replaced by hostile values. The invariant, per event: the edge
either refuses it with a ``ValueError`` (the runner dead-letters it with the reason) or returns
an envelope that re-validates equal; the join either refuses it the same way (dead-lettered at
the join) or every profile it builds from what was let in is a fully valid model: validating
its dump gives an equal model that dumps to the same bytes (an int where validation gives a
float would dump differently and change the stored history).
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import replace
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from models import Envelope, from_json, to_json
from streams.profiles.join import NodeProfileUpdate, TaskProfileUpdate
from streams.profiles.node_state import decode_node_state, encode_node_state
from streams.profiles.operators import DEFAULT_RULES, ProfileJoin
from tests.fuzzing import fuzz, json_leaves
from tests.streams.profiles_reference import RECOVER_S, st_events

HOSTILE: st.SearchStrategy[Any] = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([2**63, -1, 0, 1, 7, 8, 1001, 65_536, 10**30]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0.5, 3.0, 81_920.0, 1e300]),
    st.text(max_size=6),
    st.none(),
    st.booleans(),
    st.builds(list),
    st.builds(dict),
    st.sampled_from(["2026-01-01T00:00:00", "9999-12-31T23:59:59-14:00", "n0", "ns/p1"]),
)


def _set(data: Any, path: tuple[Any, ...], new: Any) -> None:
    for step in path[:-1]:
        data = data[step]
    data[path[-1]] = new


_one_in_three = st.integers(0, 2)
_changes = st.integers(1, 2)


@st.composite
def st_hostile_stream(draw: st.DrawFn) -> list[bytes]:
    """The events' bus bytes, about one in three with one or two leaves replaced."""
    out = []
    for env in draw(st_events()):
        data = env.model_dump(mode="json")
        if draw(_one_in_three) == 0:
            paths = list(json_leaves(data))
            # a path drawn by its index: ``sampled_from(paths)`` would build (and validate) a
            # new strategy for every event, which cost more than the test itself
            where = st.integers(0, len(paths) - 1)
            for _ in range(draw(_changes)):
                # an earlier change may have removed the parent
                with contextlib.suppress(KeyError, IndexError, TypeError):
                    _set(data, paths[draw(where)], draw(HOSTILE))
        out.append(json.dumps(data).encode())
    return out


def _valid_as_is(model: BaseModel) -> None:
    again = type(model).model_validate(model.model_dump())
    assert again == model
    assert to_json(again) == to_json(model)


@fuzz
@given(stream=st_hostile_stream())
def test_the_edge_refuses_or_lets_in_only_valid_models_and_the_join_builds_only_valid_ones(
    stream: list[bytes],
) -> None:
    join = ProfileJoin(rules=replace(DEFAULT_RULES, recover_after_s=RECOVER_S))
    for raw in stream:
        try:
            env = from_json(Envelope, raw)
        except ValueError as exc:  # ValidationError, JSONDecodeError: dead-lettered
            assert str(exc)
            continue
        _valid_as_is(env)
        try:
            updates = join.apply(env)
        except ValueError as exc:  # the runner dead-letters it at the join, with the reason
            # (a pod named "p1/p5" is a valid Pod but no valid profile key "namespace/name")
            assert str(exc)
            continue
        for update in updates:
            profile = (
                update.profile
                if isinstance(update, NodeProfileUpdate | TaskProfileUpdate)
                else None
            )
            if profile is not None:
                _valid_as_is(profile)
                for gpu in getattr(profile, "gpus", ()):
                    _valid_as_is(gpu)
    for state in join.node_states.values():
        # a snapshot read back (a restarted worker) is the other way into the join
        back = decode_node_state(encode_node_state(state))
        assert back == state
        if back.profile is not None:
            _valid_as_is(back.profile)
