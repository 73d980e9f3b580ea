"""The extender protocol read from what a real kube-scheduler sent (fixtures/extender, recorded
from v1.37.2), and answered in the form it asked in."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import orjson
import pytest

from connectors.kube.extender import wire

FIXTURES = Path(__file__).parent / "fixtures" / "extender"
NOW = datetime(2026, 12, 7, tzinfo=UTC)
FORMS = ("node-cache-true", "node-cache-false")


def captured(form: str, verb: str) -> list[Path]:
    paths = sorted((FIXTURES / form).glob(f"*-{verb}.json"))
    assert paths, f"no {verb} capture in {form}"
    return paths


@pytest.mark.parametrize("form", FORMS)
def test_every_captured_filter_and_prioritize_call_decodes_to_the_pod_and_its_nodes(
    form: str,
) -> None:
    for path in [*captured(form, "filter"), *captured(form, "prioritize")]:
        raw = orjson.loads(path.read_bytes())
        args = wire.extender_args(path.read_bytes(), now=NOW)
        assert args.pod.name == raw["Pod"]["metadata"]["name"]
        assert args.pod.uid == raw["Pod"]["metadata"]["uid"]
        gpus = sum(
            int(c["resources"].get("limits", {}).get("nvidia.com/gpu", 0))
            for c in raw["Pod"]["spec"]["containers"]
        )
        assert args.pod.requests.gpu_count == gpus
        if form == "node-cache-true":
            assert args.names == tuple(raw["NodeNames"]) and args.nodes is None
        else:
            assert args.names == tuple(n["metadata"]["name"] for n in raw["Nodes"]["items"])
            assert args.nodes is not None and len(args.nodes) == len(args.names)


@pytest.mark.parametrize("form", FORMS)
def test_a_filter_answer_keeps_the_form_of_the_request(form: str) -> None:
    path = captured(form, "filter")[0]
    args = wire.extender_args(path.read_bytes(), now=NOW)
    keep, drop = args.names[:1], args.names[1:]
    answer = orjson.loads(
        wire.filter_result(
            args, keep, failed={n: "gpufrag: gpu_count" for n in drop}, unresolvable={}
        )
    )
    assert set(answer) == {
        "Nodes",
        "NodeNames",
        "FailedNodes",
        "FailedAndUnresolvableNodes",
        "Error",
    }
    if args.nodes is None:
        assert answer["NodeNames"] == list(keep) and answer["Nodes"] is None
    else:
        # the scheduler reads the Node objects back: the very ones it sent, unchanged
        assert answer["NodeNames"] is None
        assert answer["Nodes"]["items"] == [n for n in args.nodes if n["metadata"]["name"] in keep]
    assert answer["FailedNodes"] == {n: "gpufrag: gpu_count" for n in drop}
    assert answer["Error"] == ""


@pytest.mark.parametrize("form", FORMS)
def test_every_captured_bind_decodes(form: str) -> None:
    for path in captured(form, "bind"):
        raw = orjson.loads(path.read_bytes())
        args = wire.binding_args(path.read_bytes())
        assert (args.pod_name, args.namespace, args.uid, args.node) == (
            raw["PodName"],
            raw["PodNamespace"],
            raw["PodUID"],
            raw["Node"],
        )
        assert args.key == f"{raw['PodNamespace']}/{raw['PodName']}"


@pytest.mark.parametrize("form", FORMS)
def test_preemption_victims_are_read_from_either_form_and_answered_by_uid(form: str) -> None:
    (path,) = captured(form, "preempt")
    raw = orjson.loads(path.read_bytes())
    args = wire.preemption_args(path.read_bytes(), now=NOW)
    assert args.pod.priority == 1000
    if form == "node-cache-true":
        expected = {
            node: tuple(p["UID"] for p in v["Pods"])
            for node, v in raw["NodeNameToMetaVictims"].items()
        }
    else:
        expected = {
            node: tuple(p["metadata"]["uid"] for p in v["Pods"])
            for node, v in raw["NodeNameToVictims"].items()
        }
    assert {n: uids for n, (uids, _) in args.victims.items()} == expected
    assert expected and all(expected.values())
    answer = orjson.loads(wire.preemption_result(args.victims))
    assert set(answer) == {"NodeNameToMetaVictims"}
    for node, uids in expected.items():
        assert answer["NodeNameToMetaVictims"][node]["Pods"] == [{"UID": u} for u in uids]


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b"not json", "not JSON"),
        (b"[]", "JSON object"),
        (b'{"NodeNames": ["a"]}', "no Pod"),
        (b'{"Pod": {"metadata": {"name": "p"}, "spec": {"containers": []}}}', "neither"),
        (
            b'{"Pod": {"metadata": {"name": "p"}, "spec": {"containers": []}}, "NodeNames": [1]}',
            "list of names",
        ),
        (b'{"Pod": {"metadata": {}, "spec": {}}, "NodeNames": []}', "Pod:"),
    ],
)
def test_a_request_that_is_not_the_protocol_is_refused_with_the_reason(
    body: bytes, words: str
) -> None:
    with pytest.raises(wire.ExtenderRequestError, match=words):
        wire.extender_args(body, now=NOW)


def test_a_bind_without_its_pod_or_node_is_refused() -> None:
    with pytest.raises(wire.ExtenderRequestError, match="not a string"):
        wire.binding_args(b'{"PodName": "p", "PodNamespace": "ns", "PodUID": "u"}')
    with pytest.raises(wire.ExtenderRequestError, match="must not be empty"):
        wire.binding_args(b'{"PodName": "", "PodNamespace": "ns", "PodUID": "u", "Node": "n"}')
