"""A saved ``kubectl get nodes,pods -A -o json`` read into gpufrag's nodes and pods.

The same mappings as the watchers use, so a snapshot and a live watch say the same of one
object. A node or pod that cannot be mapped, or that is listed twice, stops the read with one
line naming it and the field at fault: an analysis that silently left out (or doubled) a node
would report its pods as unplaceable. A node its bound pods overfill is read, with a warning.
Objects of other kinds (services, events) are counted and left out.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson
from kubernetes_asyncio.client.exceptions import ApiException

from connectors.kube.dra.decode import claim_names_of
from connectors.kube.dra.dra_view import DraView
from connectors.kube.dra.kinds import DRA_KINDS
from connectors.kube.dra.overlay import ClaimUse
from connectors.kube.objects import MappingError, name_of
from connectors.kube.watch.model_decode import decode_model
from connectors.kube.watch.nodes import node_from_kube
from connectors.kube.watch.overcommit import Overcommit
from connectors.kube.watch.pods import pod_from_kube
from models import Node, Pod

__all__ = ["Snapshot", "SnapshotError", "read_snapshot"]

_MODELS = {"Node": "V1Node", "Pod": "V1Pod"}


class SnapshotError(ValueError):
    """What makes a snapshot unusable, said in one line."""


@dataclass(slots=True)
class Snapshot:
    nodes: list[Node] = field(default_factory=list)
    pods: list[Pod] = field(default_factory=list)
    pending_messages: dict[str, str] = field(default_factory=dict)
    """kube-scheduler's own words for a pending pod (its PodScheduled=False condition)."""
    other_kinds: Counter[str] = field(default_factory=Counter)
    warnings: list[str] = field(default_factory=list)
    """What was read but changes the figures (a node its pods overfill), one line each."""
    dra: DraView = field(default_factory=DraView)
    """The DRA objects (``kubectl get ...,resourceslices,resourceclaims,deviceclasses``),
    already laid over the nodes and pods."""


def _items(data: bytes, source: str) -> list[Any]:
    try:
        body = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise SnapshotError(f"{source} is not JSON ({exc}); expected kubectl ... -o json") from None
    if not isinstance(body, dict) or not isinstance(body.get("items"), list):
        kind = body.get("kind") if isinstance(body, dict) else type(body).__name__
        raise SnapshotError(
            f"{source} is not a list of objects (kind {kind!r}); "
            "expected the output of kubectl get nodes,pods -A -o json"
        )
    return list(body["items"])


def _scheduler_message(raw: dict[str, Any]) -> str | None:
    status = raw.get("status")
    conditions = status.get("conditions") if isinstance(status, dict) else None
    for c in conditions if isinstance(conditions, list) else []:
        if isinstance(c, dict) and c.get("type") == "PodScheduled" and c.get("status") == "False":
            return str(c.get("message") or c.get("reason") or "")
    return None


def read_snapshot(data: bytes, *, source: str, now: datetime, pool_label: str | None) -> Snapshot:
    """The nodes and pods of a kubectl JSON list; SnapshotError names the first object that
    cannot be read and why. Each object becomes the client's model by ``decode_model`` (what
    ``ApiClient.deserialize`` builds, without its cost: 20,000 pods took it seconds)."""
    return _read_items(_items(data, source), source=source, now=now, pool_label=pool_label)


def _read_items(
    items: list[Any], *, source: str, now: datetime, pool_label: str | None
) -> Snapshot:
    out = Snapshot()
    uses: dict[str, tuple[ClaimUse, ...]] = {}
    seen: dict[tuple[str, str], int] = {}
    overcommit = Overcommit()
    for i, raw in enumerate(items):
        # each item let go once read (the list is ours): its dicts are freed while the pods
        # are built, so they reuse that memory instead of growing the heap past it
        items[i] = None
        kind = raw.get("kind") if isinstance(raw, dict) else None
        if isinstance(raw, dict) and kind in DRA_KINDS:
            try:
                out.dra.record(str(kind), raw)
            except MappingError as exc:
                raise SnapshotError(f"{source}: {kind} {name_of(raw)}: {exc}") from None
            continue
        if not isinstance(raw, dict) or kind not in _MODELS:
            out.other_kinds[str(kind or type(raw).__name__)] += 1
            continue
        who = name_of(raw)
        where = f"{source}: {kind} {who if who != '?' else f'items[{i}]'}"
        first = seen.setdefault((kind, who), i)
        if first != i and who != "?":
            # kubectl lists each object once: a second copy would count its cards twice
            raise SnapshotError(f"{where}: listed twice (items[{first}] and items[{i}])")
        try:
            obj = decode_model(raw, _MODELS[kind])
            if kind == "Node":
                out.nodes.append(node_from_kube(obj, pool_label=pool_label, now=now))
                overcommit.node(obj)
                continue
            pod = pod_from_kube(obj, gangs=lambda _ns, _name: None, now=now)
            overcommit.pod(obj)
        except MappingError as exc:
            raise SnapshotError(f"{where}: {exc}") from None
        except ApiException as exc:  # the client's own refusal ("Failed to parse `yesterday`")
            raise SnapshotError(f"{where}: unreadable ({exc.reason})") from None
        except (ValueError, TypeError, AttributeError) as exc:
            raise SnapshotError(f"{where}: unreadable ({type(exc).__name__}: {exc})") from None
        out.pods.append(pod)
        claims = claim_names_of(raw)
        if claims:
            uses[pod.key] = claims
        message = _scheduler_message(raw)
        if message is not None and pod.node is None:
            out.pending_messages[pod.key] = message
    out.warnings = [f"{source}: {w}" for w in overcommit.warnings()]
    if out.dra.book.slices or uses:
        _lay_dra(out, uses, source=source)
    return out


def _lay_dra(out: Snapshot, uses: dict[str, tuple[ClaimUse, ...]], *, source: str) -> None:
    """DRA's devices over the nodes, and its claims over the pods, once every object is read
    (a claim may be listed after its pod, a slice after its node)."""
    try:
        out.nodes = [out.dra.node(n) for n in out.nodes]
        out.pods = [out.dra.pod(p, uses[p.key]) if p.key in uses else p for p in out.pods]
    except MappingError as exc:
        raise SnapshotError(f"{source}: {exc}") from None
