"""The fake API server's state: objects per resource, a global resourceVersion counter (one
for all resources, like etcd's revision), the change history watches replay from, and
compaction, after which a watch from an older resourceVersion gets 410 Gone.

Objects go in as kubernetes-asyncio model objects (``V1Pod(...)``) and are stored as the JSON
the API server would send, made by kubernetes-asyncio's own serializer; custom resources
(Kueue, Volcano: kubernetes-asyncio has no models for them) go in as dicts.
"""

from __future__ import annotations

import asyncio
import copy
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kubernetes_asyncio.client import ApiClient

__all__ = ["BOOKMARK", "KILL", "Change", "FakeCluster", "ResourceDef"]


@dataclass(frozen=True, slots=True)
class ResourceDef:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.group, self.version, self.plural)


@dataclass(frozen=True, slots=True)
class Change:
    rv: int
    resource: tuple[str, str, str]
    type: str  # ADDED, MODIFIED, DELETED
    obj: dict[str, Any]
    old: dict[str, Any] | None


BOOKMARK = object()
"""Queued to every open watch by ``FakeCluster.bookmark()``."""
KILL = object()
"""Queued to open watches to make the server drop them mid-stream."""

CORE = (
    ResourceDef("", "v1", "pods", "Pod", True),
    ResourceDef("", "v1", "nodes", "Node", False),
    ResourceDef("", "v1", "events", "Event", True),
    ResourceDef("", "v1", "resourcequotas", "ResourceQuota", True),
)
_MODEL_PLURALS = {
    "V1Pod": "pods",
    "V1Node": "nodes",
    "CoreV1Event": "events",
    "V1ResourceQuota": "resourcequotas",
}


class FakeCluster:
    def __init__(self, *, first_rv: int = 1000) -> None:
        self.rv = first_rv
        self.defs: dict[tuple[str, str, str], ResourceDef] = {d.key: d for d in CORE}
        self.objects: dict[tuple[str, str, str], dict[tuple[str, str], dict[str, Any]]] = {}
        self.history: list[Change] = []
        self.oldest_rv = 0
        """A watch from a resourceVersion below this gets 410 Gone (history compacted)."""
        self.subscribers: set[asyncio.Queue[Any]] = set()
        self._api = ApiClient()

    async def close(self) -> None:
        await self._api.close()

    # --- resources ------------------------------------------------------------------------

    def install(
        self, group: str, version: str, plural: str, kind: str, *, namespaced: bool
    ) -> None:
        """Install a CRD: from now on its collection is served instead of 404."""
        d = ResourceDef(group, version, plural, kind, namespaced)
        self.defs[d.key] = d

    def find(self, group: str, version: str, plural: str) -> ResourceDef | None:
        return self.defs.get((group, version, plural))

    def _def_of(self, data: dict[str, Any], obj: Any) -> ResourceDef:
        plural = _MODEL_PLURALS.get(type(obj).__name__)
        if plural is not None:
            return self.defs[("", "v1", plural)]
        api_version, kind = str(data.get("apiVersion", "")), data.get("kind")
        group, _, version = api_version.rpartition("/")
        for d in self.defs.values():
            if d.group == group and d.version == version and d.kind == kind:
                return d
        raise KeyError(f"no resource installed for {api_version} {kind}")

    # --- changes --------------------------------------------------------------------------

    def _serialize(self, obj: Any) -> dict[str, Any]:
        if isinstance(obj, dict):
            return copy.deepcopy(obj)
        data = self._api.sanitize_for_serialization(obj)
        assert isinstance(data, dict)
        return data

    def _record(self, change: Change) -> None:
        self.history.append(change)
        for q in list(self.subscribers):
            q.put_nowait(change)

    def apply(self, obj: Any) -> dict[str, Any]:
        """Create or replace an object (kubernetes-asyncio model, or dict for a CRD); returns
        what is stored, with uid and resourceVersion set as the API server sets them."""
        data = self._serialize(obj)
        d = self._def_of(data, obj)
        meta = data.setdefault("metadata", {})
        namespace = (meta.get("namespace") or "default") if d.namespaced else ""
        if d.namespaced:
            meta["namespace"] = namespace
        bucket = self.objects.setdefault(d.key, {})
        old = bucket.get((namespace, meta["name"]))
        self.rv += 1
        if old is not None:
            meta["uid"] = old["metadata"]["uid"]
            meta["creationTimestamp"] = old["metadata"]["creationTimestamp"]
        else:
            meta.setdefault("uid", str(uuid.uuid4()))
            meta.setdefault("creationTimestamp", datetime.now(UTC).isoformat())
        meta["resourceVersion"] = str(self.rv)
        data["kind"], data["apiVersion"] = d.kind, d.api_version
        bucket[(namespace, meta["name"])] = data
        self._record(Change(self.rv, d.key, "MODIFIED" if old else "ADDED", data, old))
        return data

    def delete(
        self, plural: str, name: str, namespace: str = "", *, group: str = "", version: str = "v1"
    ) -> None:
        d = self.defs[(group, version, plural)]
        ns = (namespace or "default") if d.namespaced else ""
        old = self.objects[d.key].pop((ns, name))
        self.rv += 1
        gone = copy.deepcopy(old)
        gone["metadata"]["resourceVersion"] = str(self.rv)  # the deletion's own version
        self._record(Change(self.rv, d.key, "DELETED", gone, old))

    def live(self, plural: str, *, group: str = "", version: str = "v1") -> list[dict[str, Any]]:
        return list(self.objects.get((group, version, plural), {}).values())

    def compact(self) -> None:
        """Forget the history up to now: watches from any older resourceVersion get 410."""
        self.history.clear()
        self.oldest_rv = self.rv

    def bookmark(self) -> None:
        """Make every open watch that asked for bookmarks send one at the current version."""
        for q in list(self.subscribers):
            q.put_nowait(BOOKMARK)

    def send_raw(self, line: bytes) -> None:
        """Write ``line`` as it is into every open watch stream (a garbled event)."""
        for q in list(self.subscribers):
            q.put_nowait(line)

    def kill_watches(self) -> None:
        for q in list(self.subscribers):
            q.put_nowait(KILL)
