"""A fake kube-apiserver over real HTTP (aiohttp on 127.0.0.1), following the protocol the
watchers depend on:

- LIST: ``{"kind": "<Kind>List", "metadata": {"resourceVersion", "continue"}, "items"}`` with
  ``limit``/``continue`` paging over a consistent snapshot; an expired continue token is 410.
- WATCH (``?watch=1&resourceVersion=N&allowWatchBookmarks=true&timeoutSeconds=T``): a chunked
  stream of JSON lines ``{"type": ADDED|MODIFIED|DELETED|BOOKMARK|ERROR, "object"}``. Changes
  after N are replayed from history, then live ones follow. A resourceVersion older than the
  compacted history gets, like the real server, HTTP 200 and one ERROR event carrying a Status
  with code 410 "too old resource version" (or HTTP 410 with ``gone_as_http``). BOOKMARKs carry
  only ``metadata.resourceVersion``. "0" or no resourceVersion starts with synthetic ADDED
  events for the current objects. Selectors apply to watches too: an object that stops
  matching is sent as DELETED, one that starts matching as ADDED.
- 404 Status for a group/version/resource that is not installed (a missing CRD), 401 for a
  missing or wrong bearer token, 400 for selectors the server would not accept.
- Faults: dropped watch connections mid-stream, failing or slow requests, the server itself
  stopped (connection refused) and started again on the same port.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web
from kubernetes_asyncio.client import Configuration

from tests.kube_fake.cluster import BOOKMARK, KILL, Change, FakeCluster, ResourceDef
from tests.kube_fake.selectors import (
    SelectorError,
    matches_fields,
    matches_labels,
    parse_field_selector,
    parse_label_selector,
)
from tests.ports import free_port

__all__ = ["FakeApiServer", "RequestRecord", "free_port"]


@dataclass(slots=True)
class RequestRecord:
    path: str
    query: dict[str, str]
    watch: bool
    status: int = 0
    """0 while the request is being answered (a watch that is still streaming)."""

    @property
    def resource_version(self) -> str | None:
        return self.query.get("resourceVersion")


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


def _status_response(code: int, reason: str, message: str) -> web.Response:
    return web.Response(
        status=code,
        body=orjson.dumps(_status(code, reason, message)),
        content_type="application/json",
    )


@dataclass
class Faults:
    fail_lists: int = 0
    """The next N lists answer ``fail_status``."""
    fail_watches: int = 0
    """The next N watch requests answer ``fail_status``."""
    refuse_watches: bool = False
    """While set, every watch request answers ``fail_status``."""
    fail_status: int = 503
    slow_lists: int = 0
    """The next N lists wait ``slow_s`` before answering."""
    slow_s: float = 0.0
    expire_continues: int = 0
    """The next N list requests with a continue token answer 410 (token expired)."""
    gone_as_http: bool = False
    """Answer a too-old watch with HTTP 410 instead of an ERROR event in a 200 stream."""
    bookmark_every_s: float | None = None
    """Send a BOOKMARK on a watch idle this long (the real server: about once a minute)."""


@dataclass
class _Snapshot:
    items: list[dict[str, Any]]
    rv: int
    kind: str
    api_version: str
    offset: int = 0


class FakeApiServer:
    def __init__(self, cluster: FakeCluster, *, token: str = "fake-token") -> None:
        self.cluster = cluster
        self.token = token
        self.port = free_port()
        self.faults = Faults()
        self.requests: list[RequestRecord] = []
        self._continues: dict[str, _Snapshot] = {}
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def configuration(self, *, token: str | None = None) -> Configuration:
        """A kubernetes-asyncio client configuration pointing here, with the bearer token."""
        cfg = Configuration(host=self.url)
        cfg.api_key = {"BearerToken": token if token is not None else self.token}
        cfg.api_key_prefix = {"BearerToken": "Bearer"}
        return cfg

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, shutdown_timeout=0.2)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port, reuse_address=True)
        await site.start()

    async def stop(self) -> None:
        """Go away: open watches are cut mid-stream, new connections are refused."""
        if self._runner is None:
            return
        self.cluster.kill_watches()
        await asyncio.sleep(0)
        runner, self._runner = self._runner, None
        await runner.cleanup()

    def drop_watches(self) -> None:
        """Cut every open watch connection mid-stream (no terminating chunk)."""
        self.cluster.kill_watches()

    def expire_continue_tokens(self) -> None:
        self._continues.clear()

    def lists(self, plural: str | None = None) -> list[RequestRecord]:
        return [
            r for r in self.requests if not r.watch and (plural is None or r.path.endswith(plural))
        ]

    def watches(self, plural: str | None = None) -> list[RequestRecord]:
        return [r for r in self.requests if r.watch and (plural is None or r.path.endswith(plural))]

    # --- routing --------------------------------------------------------------------------

    def _route(self, path: str) -> tuple[ResourceDef | None, str | None]:
        parts = [p for p in path.split("/") if p]
        if parts[:2] == ["api", "v1"]:
            group, version, rest = "", "v1", parts[2:]
        elif len(parts) >= 3 and parts[0] == "apis":
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            return None, None
        namespace = None
        if len(rest) == 3 and rest[0] == "namespaces":
            namespace, rest = rest[1], rest[2:]
        if len(rest) != 1:
            return None, None
        d = self.cluster.find(group, version, rest[0])
        if d is None or (namespace is not None and not d.namespaced):
            return None, None
        return d, namespace

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        query = dict(request.query)
        watch = query.get("watch") in ("1", "true", "True")
        record = RequestRecord(request.path, query, watch)
        self.requests.append(record)
        status = 200
        try:
            if request.headers.get("Authorization") != f"Bearer {self.token}":
                status = 401
                return _status_response(401, "Unauthorized", "Unauthorized")
            d, namespace = self._route(request.path)
            if d is None:
                status = 404
                return _status_response(
                    404, "NotFound", "the server could not find the requested resource"
                )
            try:
                labels = parse_label_selector(query.get("labelSelector"))
                fields = parse_field_selector(query.get("fieldSelector"), plural=d.plural)
            except SelectorError as exc:
                status = 400
                return _status_response(400, "BadRequest", str(exc))

            def matches(obj: dict[str, Any]) -> bool:
                ns_ok = namespace is None or obj["metadata"].get("namespace") == namespace
                return ns_ok and matches_labels(labels, obj) and matches_fields(fields, obj)

            if watch:
                if self.faults.refuse_watches or self.faults.fail_watches > 0:
                    self.faults.fail_watches = max(0, self.faults.fail_watches - 1)
                    status = self.faults.fail_status
                    return _status_response(status, "ServiceUnavailable", "injected failure")
                response, status = await self._watch(request, d, matches, query)
                return response
            if self.faults.slow_lists > 0:
                self.faults.slow_lists -= 1
                await asyncio.sleep(self.faults.slow_s)
            if self.faults.fail_lists > 0:
                self.faults.fail_lists -= 1
                status = self.faults.fail_status
                return _status_response(status, "ServiceUnavailable", "injected failure")
            response = self._list(d, matches, query)
            status = response.status
            return response
        finally:
            record.status = status

    # --- list -----------------------------------------------------------------------------

    def _list(self, d: ResourceDef, matches: Any, query: dict[str, str]) -> web.Response:
        token = query.get("continue")
        if token:
            snap = self._continues.pop(token, None)
            if self.faults.expire_continues > 0:
                self.faults.expire_continues -= 1
                snap = None
            if snap is None:
                return _status_response(
                    410,
                    "Expired",
                    "The provided continue parameter is too old to display a consistent list "
                    "result. You can start a new list without the continue parameter.",
                )
        else:
            items = [
                o for _, o in sorted(self.cluster.objects.get(d.key, {}).items()) if matches(o)
            ]
            snap = _Snapshot(
                orjson.loads(orjson.dumps(items)), self.cluster.rv, d.kind, d.api_version
            )
        limit = int(query.get("limit") or 0)
        page = snap.items[snap.offset :]
        meta: dict[str, Any] = {"resourceVersion": str(snap.rv)}
        if limit and len(page) > limit:
            page = page[:limit]
            snap.offset += limit
            next_token = uuid.uuid4().hex
            self._continues[next_token] = snap
            meta["continue"] = next_token
        # Like the real server, list items of built-in kinds carry no kind/apiVersion.
        items = [
            {k: v for k, v in o.items() if d.group or k not in ("kind", "apiVersion")} for o in page
        ]
        body = {
            "kind": f"{d.kind}List",
            "apiVersion": d.api_version,
            "metadata": meta,
            "items": items,
        }
        return web.Response(body=orjson.dumps(body), content_type="application/json")

    # --- watch ----------------------------------------------------------------------------

    async def _watch(
        self, request: web.Request, d: ResourceDef, matches: Any, query: dict[str, str]
    ) -> tuple[web.StreamResponse, int]:
        cluster = self.cluster
        raw_rv = query.get("resourceVersion", "")
        bookmarks = query.get("allowWatchBookmarks") in ("true", "1", "True")
        timeout_s = float(query.get("timeoutSeconds") or 1800)
        queue: asyncio.Queue[Any] = asyncio.Queue()
        cluster.subscribers.add(queue)
        try:
            if raw_rv not in ("", "0"):
                try:
                    start = int(raw_rv)
                except ValueError:
                    return _status_response(
                        400, "BadRequest", f"invalid resource version {raw_rv!r}"
                    ), 400
                if start < cluster.oldest_rv:
                    message = f"too old resource version: {start} ({cluster.oldest_rv})"
                    if self.faults.gone_as_http:
                        return _status_response(410, "Expired", message), 410
                    response = await self._open(request)
                    await self._send(response, "ERROR", _status(410, "Expired", message))
                    await response.write_eof()
                    return response, 200
                backlog = [c for c in cluster.history if c.rv > start and c.resource == d.key]
            else:
                start = cluster.rv
                backlog = [
                    Change(cluster.rv, d.key, "ADDED", o, None)
                    for _, o in sorted(cluster.objects.get(d.key, {}).items())
                ]
            response = await self._open(request)
            for change in backlog:
                await self._send_change(response, change, matches)
            deadline = asyncio.get_running_loop().time() + timeout_s
            while True:
                left = deadline - asyncio.get_running_loop().time()
                if left <= 0:
                    break
                wait = left
                if bookmarks and self.faults.bookmark_every_s is not None:
                    wait = min(wait, self.faults.bookmark_every_s)
                try:
                    item = await asyncio.wait_for(queue.get(), wait)
                except TimeoutError:
                    if bookmarks and self.faults.bookmark_every_s is not None and left > wait:
                        await self._send_bookmark(response, d)
                    continue
                if item is KILL:
                    # Cut the connection without the final chunk: the client sees the stream
                    # break, as when an API server instance goes away.
                    if request.transport is not None:
                        request.transport.abort()
                    raise asyncio.CancelledError
                if isinstance(item, bytes):
                    await response.write(item)
                    continue
                if item is BOOKMARK:
                    if bookmarks:
                        await self._send_bookmark(response, d)
                    continue
                assert isinstance(item, Change)
                if item.resource == d.key and item.rv > start:
                    await self._send_change(response, item, matches)
            await response.write_eof()
            return response, 200
        finally:
            cluster.subscribers.discard(queue)

    async def _open(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        return response

    async def _send(self, response: web.StreamResponse, kind: str, obj: dict[str, Any]) -> None:
        await response.write(orjson.dumps({"type": kind, "object": obj}) + b"\n")

    async def _send_bookmark(self, response: web.StreamResponse, d: ResourceDef) -> None:
        obj = {
            "kind": d.kind,
            "apiVersion": d.api_version,
            "metadata": {"resourceVersion": str(self.cluster.rv)},
        }
        await self._send(response, "BOOKMARK", obj)

    async def _send_change(
        self, response: web.StreamResponse, change: Change, matches: Any
    ) -> None:
        now = matches(change.obj)
        before = change.old is not None and matches(change.old)
        if change.type == "DELETED":
            kind = "DELETED" if before or now else None
        elif change.type == "ADDED":
            kind = "ADDED" if now else None
        elif now and before:
            kind = "MODIFIED"
        elif now:
            kind = "ADDED"
        elif before:
            kind = "DELETED"
        else:
            kind = None
        if kind is not None:
            await self._send(response, kind, change.obj)
