"""``decode_model`` builds the very object kubernetes-asyncio's ``ApiClient.deserialize`` builds
(same class, same ``__dict__`` in the same order, same values of the same types, time zones
included), and refuses what it refuses with the same exception and message: on the inspect
fixture, on the bench's synthetic snapshot, and on the fixture's objects with any of their
fields swapped for hostile JSON (wrong types, nulls, bad times, nested junk)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from kubernetes_asyncio.client import ApiClient

from connectors.kube.watch.model_decode import decode_model
from streams.app.bench import synthetic
from tests.app.kubectl_snapshot import FIXTURE
from tests.fuzzing import fuzz

MODELS = {"Node": "V1Node", "Pod": "V1Pod", "Event": "CoreV1Event"}
ITEMS: list[dict[str, Any]] = [
    i for i in json.loads(FIXTURE.read_text())["items"] if i.get("kind") in MODELS
]


_LOOP = asyncio.new_event_loop()
CLIENTS: list[ApiClient] = []
"""One loop and one client for every example (a client per example costs more than it)."""


@pytest.fixture(scope="module", autouse=True)
def _client() -> Iterator[None]:
    async def new() -> ApiClient:
        return ApiClient()

    CLIENTS.append(_LOOP.run_until_complete(new()))
    yield
    _LOOP.run_until_complete(CLIENTS.pop().close())


def _client_decode(raw: Any, model: str) -> Any:
    return CLIENTS[0].deserialize(SimpleNamespace(data=orjson.dumps(raw)), model)


def _same(a: Any, b: Any, path: str = "") -> None:
    assert type(a) is type(b), (path, type(a), type(b))
    if hasattr(a, "openapi_types"):
        assert list(vars(a)) == list(vars(b)), path
        for name, value in vars(a).items():
            if name == "local_vars_configuration":
                assert value is vars(b)[name]
            else:
                _same(value, vars(b)[name], f"{path}.{name}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _same(x, y, f"{path}[{i}]")
    elif isinstance(a, dict):
        assert list(a) == list(b), path
        for k in a:
            _same(a[k], b[k], f"{path}{{{k}}}")
    else:
        assert a == b, (path, a, b)
        if hasattr(a, "tzinfo"):
            assert type(a.tzinfo) is type(b.tzinfo) and a.fold == b.fold, (path, a, b)


def _outcome(decode: Any, raw: Any, model: str) -> tuple[str, Any]:
    try:
        return "ok", decode(raw, model)
    except Exception as exc:
        return "refused", (type(exc), str(exc))


def _check(raw: Any, model: str) -> None:
    ours, theirs = _outcome(decode_model, raw, model), _outcome(_client_decode, raw, model)
    assert ours[0] == theirs[0], (ours, theirs)
    if ours[0] == "ok":
        _same(ours[1], theirs[1])
    else:
        assert ours[1] == theirs[1]


@pytest.mark.parametrize("raw", ITEMS, ids=[i["metadata"]["name"] for i in ITEMS])
def test_the_fixture_objects_decode_as_the_client_decodes_them(raw: dict[str, Any]) -> None:
    _check(raw, MODELS[raw["kind"]])


def test_the_bench_snapshot_decodes_as_the_client_decodes_it() -> None:
    c = synthetic.cluster(seed=1, nodes=20, running=40, pending=20, cpu_only=60)
    items = synthetic.kubectl_snapshot(c)["items"]
    assert {i["kind"] for i in items} == {"Node", "Pod"}
    for raw in items:
        _check(raw, MODELS[raw["kind"]])


@pytest.mark.parametrize(
    ("stamp", "refused"),
    [
        ("2026-03-01T12:34:56Z", False),
        ("2026-03-01T12:34:56.123456Z", False),
        ("2026-03-01T12:34:56.5Z", False),
        ("2026-03-01T12:34:56+02:00", False),
        ("2026-02-30T00:00:00Z", True),
        ("yesterday", True),
    ],
)
def test_time_stamps_read_or_refused_as_the_client_does(stamp: str, refused: bool) -> None:
    raw = {"metadata": {"name": "p", "creationTimestamp": stamp}, "spec": {"containers": []}}
    assert _outcome(decode_model, raw, "V1Pod")[0] == ("refused" if refused else "ok")
    _check(raw, "V1Pod")


def test_a_missing_required_field_is_the_setters_refusal() -> None:
    raw = {"metadata": {"name": "p"}, "spec": {"containers": [{"image": "x"}]}}
    with pytest.raises(ValueError, match="Invalid value for `name`, must not be `None`"):
        decode_model(raw, "V1Pod")
    _check(raw, "V1Pod")


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += _paths(v, (*prefix, i))
    return out


def _replaced(obj: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    copy = list(obj) if isinstance(obj, list) else dict(obj)
    copy[path[0]] = _replaced(obj[path[0]], path[1:], value)
    return copy


HOSTILE = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**63), max_value=2**63 - 1),
        st.floats(allow_nan=False, allow_infinity=False),
        st.sampled_from(["", "x", "false", "12", "2026-01-01T00:00:00Z", "not-a-date", "1Gi"]),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(["name", "type", "status", "key", "x"]), inner, max_size=3),
    ),
    max_leaves=6,
)


@st.composite
def st_mangled(draw: st.DrawFn) -> tuple[dict[str, Any], str]:
    raw = draw(st.sampled_from(ITEMS))
    model = MODELS[raw["kind"]]
    for _ in range(draw(st.integers(1, 3))):
        raw = _replaced(raw, draw(st.sampled_from(_paths(raw))), draw(HOSTILE))
    return raw, model


@fuzz
@given(case=st_mangled())
def test_hostile_fields_decode_or_are_refused_as_the_client_does(
    case: tuple[dict[str, Any], str],
) -> None:
    raw, model = case
    _check(raw, model)
