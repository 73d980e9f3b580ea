"""JSON round trips must be exact: the bus, the dead-letter table and replays all rely on it."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from models import Action, Envelope, EventKind, NodeProfile, Signal, TaskProfile, from_json, to_json
from tests.models.result_strategies import st_action, st_node_profile, st_signal, st_task_profile
from tests.models.strategies import st_envelope


def _assert_exact(model: BaseModel) -> None:
    data = to_json(model)
    back = from_json(type(model), data)
    assert back == model
    assert to_json(back) == data


@pytest.mark.parametrize("kind", list(EventKind))
@given(data=st.data())
def test_envelope_round_trip_each_kind(kind: EventKind, data: st.DataObject) -> None:
    envelope = data.draw(st_envelope(kind=kind))
    assert envelope.kind is kind
    _assert_exact(envelope)


@given(st_envelope())
def test_envelope_from_str_too(envelope: Envelope) -> None:
    assert from_json(Envelope, to_json(envelope).decode()) == envelope


@given(st_signal())
def test_signal_round_trip(signal: Signal) -> None:
    _assert_exact(signal)


@given(st_action())
def test_action_round_trip(action: Action) -> None:
    _assert_exact(action)


@given(st_node_profile())
def test_node_profile_round_trip(profile: NodeProfile) -> None:
    _assert_exact(profile)


@given(st_task_profile())
def test_task_profile_round_trip(profile: TaskProfile) -> None:
    _assert_exact(profile)


@given(st_envelope())
def test_wrap_is_deterministic(envelope: Envelope) -> None:
    again = Envelope.wrap(envelope.payload, event_time=envelope.event_time, source=envelope.source)
    twice = Envelope.wrap(envelope.payload, event_time=envelope.event_time, source=envelope.source)
    assert again == twice
    assert again.key == envelope.key
