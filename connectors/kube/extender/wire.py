"""The extender protocol's JSON (``k8s.io/kube-scheduler/extender/v1``) in and out.

The scheduler encodes these types with Go's ``encoding/json`` and no JSON tags, so every key is
the Go field name, capitalised (``Pod``, ``NodeNames``, ``FailedNodes``), always present, and
``null`` where a pointer or map is nil. The Pod and Nodes inside are ordinary Kubernetes JSON.
With ``nodeCacheCapable: true`` the scheduler sends ``NodeNames`` and expects names back; without
it, whole ``Nodes`` and expects the objects back. A filter answer with neither rejects every
node, so the answer always carries the form it was asked in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import repeat
from typing import Any

import orjson

from connectors.kube.objects import MappingError
from connectors.kube.watch.model_decode import decode_model
from connectors.kube.watch.pods import pod_from_kube
from models import Pod

__all__ = [
    "BindingArgs",
    "ExtenderArgs",
    "ExtenderRequestError",
    "PodCache",
    "PreemptionArgs",
    "binding_args",
    "binding_result",
    "extender_args",
    "filter_result",
    "preemption_args",
    "preemption_result",
    "priority_list",
]


class ExtenderRequestError(ValueError):
    """A request that is not what kube-scheduler sends for the verb."""


@dataclass(frozen=True, slots=True)
class ExtenderArgs:
    pod: Pod
    names: tuple[str, ...]
    nodes: tuple[dict[str, Any], ...] | None
    """The Node objects, when the scheduler sent them (not node-cache capable)."""


@dataclass(frozen=True, slots=True)
class BindingArgs:
    pod_name: str
    namespace: str
    uid: str
    node: str

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.pod_name}"


@dataclass(frozen=True, slots=True)
class PreemptionArgs:
    pod: Pod
    victims: dict[str, tuple[tuple[str, ...], int]]
    """node -> (victim pod UIDs, PDB violations), from whichever form the scheduler sent."""


def _object(body: bytes) -> dict[str, Any]:
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise ExtenderRequestError(f"not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ExtenderRequestError(f"a JSON object was expected, not {type(data).__name__}")
    return data


class PodCache:
    """The pods of the last calls, by UID and resourceVersion: the scheduler sends one pod to
    filter, then prioritize, then (on a retry) again, and reading a Pod is half of a call's
    cost at 1,000 nodes (gpufrag bench --case extender)."""

    def __init__(self, *, size: int = 64) -> None:
        self._size = size
        self._pods: dict[tuple[str, str], Pod] = {}

    def get(self, raw: dict[str, Any], *, now: datetime) -> Pod:
        meta = raw.get("metadata")
        uid = meta.get("uid") if isinstance(meta, dict) else None
        version = meta.get("resourceVersion") if isinstance(meta, dict) else None
        if not isinstance(uid, str) or not uid or not isinstance(version, str) or not version:
            return _decoded(raw, now=now)  # nothing to know it again by
        key = (uid, version)
        pod = self._pods.get(key)
        if pod is None:
            pod = self._pods[key] = _decoded(raw, now=now)
            if len(self._pods) > self._size:
                del self._pods[next(iter(self._pods))]
        return pod


def _pod(data: dict[str, Any], *, now: datetime, pods: PodCache | None) -> Pod:
    raw = data.get("Pod")
    if not isinstance(raw, dict):
        raise ExtenderRequestError("no Pod in the request")
    return _decoded(raw, now=now) if pods is None else pods.get(raw, now=now)


def _decoded(raw: dict[str, Any], *, now: datetime) -> Pod:
    try:
        return pod_from_kube(decode_model(raw, "V1Pod"), gangs=lambda _ns, _g: None, now=now)
    except MappingError as exc:
        raise ExtenderRequestError(f"Pod: {exc}") from None
    except (ValueError, TypeError) as exc:  # the client model's own refusals
        raise ExtenderRequestError(f"Pod: {exc}") from None


def _items(nodes: Any) -> tuple[dict[str, Any], ...]:
    if not isinstance(nodes, dict) or not isinstance(nodes.get("items"), list):
        raise ExtenderRequestError("Nodes is not a NodeList")
    items = nodes["items"]
    if not all(isinstance(n, dict) for n in items):
        raise ExtenderRequestError("Nodes.items holds something that is not a Node")
    return tuple(items)


def _name(node: dict[str, Any]) -> str:
    meta = node.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    if not isinstance(name, str) or not name:
        raise ExtenderRequestError("a Node without metadata.name")
    return name


def extender_args(body: bytes, *, now: datetime, pods: PodCache | None = None) -> ExtenderArgs:
    """Filter's and prioritize's ``ExtenderArgs``."""
    data = _object(body)
    pod = _pod(data, now=now, pods=pods)
    names = data.get("NodeNames")
    if names is not None:
        if not isinstance(names, list) or not all(map(isinstance, names, repeat(str))):
            raise ExtenderRequestError("NodeNames is not a list of names")
        return ExtenderArgs(pod, tuple(names), None)
    nodes = data.get("Nodes")
    if nodes is None:
        raise ExtenderRequestError("neither NodeNames nor Nodes in the request")
    items = _items(nodes)
    return ExtenderArgs(pod, tuple(_name(n) for n in items), items)


def filter_result(
    args: ExtenderArgs,
    passed: Sequence[str],
    *,
    failed: Mapping[str, str],
    unresolvable: Mapping[str, str],
    error: str = "",
) -> bytes:
    """``ExtenderFilterResult`` in the form the request came in."""
    if args.nodes is None:
        nodes: Any = None
        names: Any = list(passed)
    else:
        keep = set(passed)
        nodes = {"metadata": {}, "items": [n for n in args.nodes if _name(n) in keep]}
        names = None
    return orjson.dumps(
        {
            "Nodes": nodes,
            "NodeNames": names,
            "FailedNodes": dict(failed),
            "FailedAndUnresolvableNodes": dict(unresolvable),
            "Error": error,
        }
    )


def priority_list(scores: Sequence[tuple[str, int]]) -> bytes:
    """``HostPriorityList``: a bare array."""
    return orjson.dumps([{"Host": host, "Score": score} for host, score in scores])


def binding_args(body: bytes) -> BindingArgs:
    data = _object(body)
    fields = {}
    for key in ("PodName", "PodNamespace", "PodUID", "Node"):
        value = data.get(key)
        if not isinstance(value, str):
            raise ExtenderRequestError(f"{key} is not a string")
        fields[key] = value
    if not fields["PodName"] or not fields["Node"]:
        raise ExtenderRequestError("PodName and Node must not be empty")
    return BindingArgs(
        pod_name=fields["PodName"],
        namespace=fields["PodNamespace"] or "default",
        uid=fields["PodUID"],
        node=fields["Node"],
    )


def binding_result(error: str = "") -> bytes:
    return orjson.dumps({"Error": error})


def _victim_uids(victims: Any, *, meta: bool) -> tuple[tuple[str, ...], int]:
    if not isinstance(victims, dict):
        raise ExtenderRequestError("a node's victims are not an object")
    pods = victims.get("Pods") or []
    if not isinstance(pods, list):
        raise ExtenderRequestError("Victims.Pods is not a list")
    uids = []
    for p in pods:
        uid = p.get("UID") if meta and isinstance(p, dict) else None
        if not meta and isinstance(p, dict):
            m = p.get("metadata")
            uid = m.get("uid") if isinstance(m, dict) else None
        if not isinstance(uid, str) or not uid:
            raise ExtenderRequestError("a victim without a UID")
        uids.append(uid)
    pdb = victims.get("NumPDBViolations", 0)
    if not isinstance(pdb, int):
        raise ExtenderRequestError("NumPDBViolations is not a number")
    return tuple(uids), pdb


def preemption_args(body: bytes, *, now: datetime) -> PreemptionArgs:
    data = _object(body)
    pod = _pod(data, now=now, pods=None)
    meta = data.get("NodeNameToMetaVictims")
    full = data.get("NodeNameToVictims")
    source, is_meta = (meta, True) if meta is not None else (full, False)
    if source is None:
        return PreemptionArgs(pod, {})
    if not isinstance(source, dict):
        raise ExtenderRequestError("the victims are not a map of node names")
    return PreemptionArgs(pod, {node: _victim_uids(v, meta=is_meta) for node, v in source.items()})


def preemption_result(victims: Mapping[str, tuple[Sequence[str], int]]) -> bytes:
    """``ExtenderPreemptionResult``: always the UID form, whatever form came in (the
    scheduler reads only ``NodeNameToMetaVictims``)."""
    return orjson.dumps(
        {
            "NodeNameToMetaVictims": {
                node: {"Pods": [{"UID": uid} for uid in uids], "NumPDBViolations": pdb}
                for node, (uids, pdb) in victims.items()
            }
        }
    )
