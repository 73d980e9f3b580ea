"""Handlers for DRA's objects and for nodes under DRA's overlay.

A DRA object emits nothing of its own: it changes what nodes and pods are (their cards, their
GPU requests), so the source restates those. A node's state keeps the node as its object says
(``base``) beside what was emitted (``shown``), so a slice or claim that changes later lays
the devices over the node again without asking the API server for it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from connectors.kube.dra.dra_view import DraView
from connectors.kube.objects import MappingError, get_path
from connectors.kube.watch.handlers import Clock
from connectors.kube.watch.object_refusals import ObjectRefusals
from models import Envelope, Node, NodeEvent

log = logging.getLogger(__name__)

__all__ = ["DraChange", "DraHandler", "NodeHandler", "ShownNode"]

DraChange = Callable[[str, dict[str, Any] | None, dict[str, Any] | None], Awaitable[None]]
"""(kind, old object, new object): called after the view took the change."""


class DraHandler:
    """One DRA kind into the view; the state is the object's last readable JSON, for the
    restate that follows its deletion."""

    def __init__(
        self, *, kind: str, view: DraView, errors: ObjectRefusals, on_change: DraChange
    ) -> None:
        self.kind = kind
        self.view = view
        self.errors = errors
        self.on_change = on_change

    async def upsert(
        self, obj: Any, prev: dict[str, Any] | None
    ) -> tuple[dict[str, Any] | None, list[Envelope]]:
        try:
            self.view.record(self.kind, obj)
        except MappingError as exc:
            self.errors.report(obj, exc)
            return prev, []
        await self.on_change(self.kind, prev, obj)
        return obj, []

    async def delete(self, prev: dict[str, Any]) -> list[Envelope]:
        name = get_path(prev, "metadata", "name")
        namespace = get_path(prev, "metadata", "namespace")
        self.view.forget(self.kind, f"{namespace}/{name}" if namespace else str(name))
        await self.on_change(self.kind, prev, None)
        return []


@dataclass(frozen=True, slots=True)
class ShownNode:
    base: Node
    shown: Node


class NodeHandler:
    """Nodes, with their DRA devices laid over them. A node whose devices cannot be read is
    refused (a dead letter naming the field) and shown as its object says."""

    def __init__(
        self,
        *,
        mapper: Callable[[Any, datetime], Node],
        view: DraView,
        source: str,
        clock: Clock,
        errors: ObjectRefusals,
    ) -> None:
        self.mapper = mapper
        self.view = view
        self.source = source
        self.clock = clock
        self.errors = errors

    def _env(self, change: str, node: Node) -> Envelope:
        payload = NodeEvent(change="delete" if change == "delete" else "upsert", node=node)
        return Envelope.wrap(payload, event_time=self.clock(), source=self.source)

    def _shown(self, base: Node, obj: Any) -> Node:
        try:
            return self.view.node(base)
        except MappingError as exc:
            self.errors.report(obj, exc)
            return base

    async def upsert(
        self, obj: Any, prev: ShownNode | None
    ) -> tuple[ShownNode | None, list[Envelope]]:
        try:
            base = self.mapper(obj, self.clock())
        except MappingError as exc:
            self.errors.report(obj, exc)
            return prev, []
        shown = self._shown(base, obj)
        if prev is not None and prev.shown == shown:
            return ShownNode(base, shown), []
        return ShownNode(base, shown), [self._env("upsert", shown)]

    async def delete(self, prev: ShownNode) -> list[Envelope]:
        return [self._env("delete", prev.shown)]

    def relay(
        self, nodes: set[str] | None
    ) -> Callable[[ShownNode], tuple[ShownNode, list[Envelope]]]:
        """A restate function laying the devices over the named nodes again (all if None)."""

        def change(state: ShownNode) -> tuple[ShownNode, list[Envelope]]:
            if nodes is not None and state.base.name not in nodes:
                return state, []
            try:
                shown = self.view.node(state.base)
            except MappingError:
                shown = state.base
            except Exception:  # one node's overlay must not stop the rest of the restate
                log.exception("DRA devices of %s could not be laid over it", state.base.name)
                return state, []
            if shown == state.shown:
                return state, []
            return ShownNode(state.base, shown), [self._env("upsert", shown)]

        return change
