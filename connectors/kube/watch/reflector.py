"""List, then watch from the list's resourceVersion: one reflector per resource.

The reflector keeps, per object (by uid), the resourceVersion it last applied and the state its
handler derived, nothing else, so memory follows the cluster's live objects, not time.

- A watch event whose resourceVersion equals the stored one is a replay and is skipped; every
  applied event and every BOOKMARK advances the resourceVersion a resumed watch starts from.
- 410 Gone (an ERROR event in the stream, or the HTTP status) means the server no longer has
  the history since our resourceVersion: re-list, and emit only the differences against the
  store (deletes first, so a name reused by a new object is not deleted after its upsert;
  then new objects and those whose resourceVersion changed). Unchanged objects emit nothing.
- A broken stream, refused connection, timeout or error status: wait (exponential backoff with
  jitter, capped) and resume the watch from the last resourceVersion; no re-list needed.
- 404 on the list: the resource is not served (CRD not installed). One log line, its stored
  objects are deleted, and it is asked for again only every ``missing_recheck_s``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import aiohttp
import orjson

from connectors.backoff import Backoff
from connectors.kube.objects import Undecodable, get_path, identity_of
from connectors.kube.watch.api import Gone, KubeApiError, NotServed, ResourceClient
from connectors.kube.watch.handlers import Emit, Handler
from connectors.kube.watch.object_refusals import ObjectRefusals
from connectors.kube.watch.watch_metrics import KubeMetrics
from models import Envelope

__all__ = ["Entry", "Reflector", "ReflectorOptions"]

log = logging.getLogger("connectors.kube")

S = TypeVar("S")


@dataclass(frozen=True, slots=True, kw_only=True)
class ReflectorOptions:
    page_size: int = 500
    watch_timeout_s: float = 300.0
    backoff_initial_s: float = 0.5
    backoff_max_s: float = 30.0
    missing_recheck_s: float = 600.0


@dataclass(slots=True)
class Entry(Generic[S]):
    rv: str
    state: S | None
    """None: seen but nothing emitted for it (an object that could not be read)."""


def _reason(exc: BaseException) -> str:
    if isinstance(exc, KubeApiError):
        return f"http_{exc.status}" if exc.status else "api"
    if isinstance(exc, TimeoutError):
        return "timeout"
    if isinstance(exc, aiohttp.ClientConnectorError | ConnectionRefusedError):
        return "connect"
    if isinstance(exc, aiohttp.ClientPayloadError | aiohttp.ServerDisconnectedError):
        return "stream"
    if isinstance(exc, aiohttp.ClientError | OSError):
        return "network"
    if isinstance(exc, orjson.JSONDecodeError | ValueError):
        return "decode"
    return "other"


_EXPECTED = ("http_", "timeout", "connect", "stream", "network", "api")


class Reflector(Generic[S]):
    def __init__(
        self,
        *,
        client: ResourceClient,
        handler: Handler[S],
        emit: Emit,
        options: ReflectorOptions,
        metrics: KubeMetrics,
        rng: random.Random,
        refusals: ObjectRefusals,
    ) -> None:
        self.client = client
        self.refusals = refusals
        self.handler = handler
        self.emit = emit
        self.options = options
        self.metrics = metrics
        self.rng = rng
        self.name = client.rtype.resource.value
        self.store: dict[str, Entry[S]] = {}
        self.resource_version: str | None = None
        self.synced = asyncio.Event()
        """Set after the first list (or the first answer that the resource is not served)."""
        self.missing = False
        self._lock = asyncio.Lock()
        self._failures = 0
        self._gone_streak = 0
        """410s with no watch event in between: the second one in a row waits (backoff)."""
        self._object_reasons_logged: set[str] = set()
        self._backoff = Backoff(
            initial_s=options.backoff_initial_s, max_s=options.backoff_max_s, rng=rng
        )

    # --- running --------------------------------------------------------------------------

    async def run(self, *, stop: asyncio.Event) -> None:
        """Watch until ``stop`` is set; errors are retried here, never raised."""
        loop = asyncio.create_task(self._loop(), name=f"kube-{self.name}")
        stopped = asyncio.create_task(stop.wait())
        try:
            await asyncio.wait({loop, stopped}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (loop, stopped):
                task.cancel()
            for task in (loop, stopped):
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def _loop(self) -> None:
        need_list = True
        while True:
            try:
                if need_list:
                    await self._relist()
                    need_list = False
                delivered = await self._watch()
                if delivered:
                    self._backoff.reset()
                else:
                    # A stream that ends with nothing in it must not turn into a busy loop.
                    await asyncio.sleep(self._backoff.next())
            except Gone as exc:
                self.metrics.errors.labels(self.name, "gone").inc()
                log.info("%s: %s; re-listing", self.name, exc.message or "410 Gone")
                need_list = True
                self._gone_streak += 1
                if self._gone_streak > 1:
                    await asyncio.sleep(self._backoff.next())
            except NotServed:
                await self._not_served()
                need_list = True
            except Exception as exc:
                self._failed(exc, listing=need_list)
                if not need_list:
                    self.metrics.reconnects.labels(self.name).inc()
                await asyncio.sleep(self._backoff.next())

    def _failed(self, exc: Exception, *, listing: bool) -> None:
        reason = _reason(exc)
        self.metrics.errors.labels(self.name, reason).inc()
        what = "list" if listing else "watch"
        if self._failures == 0:
            # One line per outage, not per retry; the count is in the metrics.
            log.warning(
                "%s: %s failed (%s: %s); retrying with backoff",
                self.name,
                what,
                type(exc).__name__,
                exc,
                exc_info=not reason.startswith(_EXPECTED),
            )
        else:
            log.debug("%s: %s failed again: %r", self.name, what, exc)
        self._failures += 1

    def _succeeded(self) -> None:
        self.metrics.last_success.labels(self.name).set(time.time())
        if self._failures:
            log.info("%s: API server answering again after %d failures", self.name, self._failures)
            self._failures = 0

    async def _not_served(self) -> None:
        if not self.missing:
            self.missing = True
            self.metrics.missing.labels(self.name).set(1)
            log.warning(
                "%s: the API server does not serve %s (CRD not installed?); "
                "not watching it, asking again every %gs",
                self.name,
                self.client.rtype.describe,
                self.options.missing_recheck_s,
            )
            async with self._lock:
                # Without its CRD the resource's objects are gone too.
                for key in list(self.store):
                    await self._drop(key)
                self.resource_version = None
            self.metrics.objects.labels(self.name).set(0)
        self.synced.set()
        await asyncio.sleep(self.options.missing_recheck_s)

    # --- list -------------------------------------------------------------------------------

    async def _relist(self) -> None:
        items: list[Any] = []
        snapshot_rv = ""
        token: str | None = None
        while True:
            page = await self.client.list_page(limit=self.options.page_size, continue_token=token)
            self._succeeded()
            items.extend(page.items)
            snapshot_rv = snapshot_rv or page.resource_version
            token = page.continue_token
            if not token:
                break
        if self.missing:
            self.missing = False
            self.metrics.missing.labels(self.name).set(0)
            log.info("%s: %s is served now; watching it", self.name, self.client.rtype.describe)
        listed = {identity_of(obj)[0]: obj for obj in items}
        del items
        async with self._lock:
            for key in [k for k in self.store if k not in listed]:
                await self._drop(key)
            for key, obj in listed.items():
                rv = identity_of(obj)[1]
                entry = self.store.get(key)
                if entry is None or entry.rv != rv:
                    await self._apply(key, rv, obj, entry)
            self.resource_version = snapshot_rv
        self.metrics.relists.labels(self.name).inc()
        self.metrics.objects.labels(self.name).set(len(self.store))
        self._backoff.reset()
        self.synced.set()

    # --- watch ------------------------------------------------------------------------------

    async def _watch(self) -> bool:
        """One watch request, read to its end; True if anything (even a bookmark) came."""
        assert self.resource_version is not None
        timeout_s = max(1, round(self.options.watch_timeout_s * self.rng.uniform(1.0, 2.0)))
        response = await self.client.watch(
            resource_version=self.resource_version, timeout_s=timeout_s
        )
        delivered = False
        try:
            while True:
                line = await response.content.readline()
                if not line:
                    return delivered  # the server ended the watch (its timeout): re-watch
                if not line.strip():
                    continue
                await self._on_line(line)
                if not delivered:
                    delivered = True
                    self._succeeded()
                else:
                    self.metrics.last_success.labels(self.name).set(time.time())
        finally:
            response.close()

    async def _on_line(self, line: bytes) -> None:
        try:
            event = orjson.loads(line)
            problem = f"a JSON {type(event).__name__}, not an event"
        except orjson.JSONDecodeError as exc:
            event, problem = None, f"not JSON: {exc}"
        if not isinstance(event, dict) or not isinstance(event.get("object") or {}, dict):
            # Re-watching from the same resourceVersion would only meet the same line again.
            self.refusals.refuse_raw(
                reason="unreadable_event",
                detail=f"a watch line that is {problem}; skipped",
                raw=line,
            )
            return
        kind = event.get("type")
        raw = event.get("object") or {}
        if kind == "ERROR":
            code = raw.get("code")
            code = code if isinstance(code, int) else 0
            message = str(raw.get("message") or raw.get("reason") or "")
            if code == 410:
                raise Gone(410, message)
            raise KubeApiError(code, message)
        self._gone_streak = 0
        rv = str(get_path(raw, "metadata", "resourceVersion") or "")
        if kind == "BOOKMARK":
            if rv:
                self.resource_version = rv
            return
        obj = self.client.read(raw)
        key, rv = identity_of(obj)
        async with self._lock:
            if kind in ("ADDED", "MODIFIED"):
                entry = self.store.get(key)
                if entry is None or entry.rv != rv:
                    await self._apply(key, rv, obj, entry)
            elif kind == "DELETED":
                if key in self.store:
                    await self._drop(key)
            else:
                log.debug("%s: ignoring watch event type %r", self.name, kind)
            if rv:
                self.resource_version = rv
        self.metrics.objects.labels(self.name).set(len(self.store))

    # --- store ------------------------------------------------------------------------------

    async def _apply(self, key: str, rv: str, obj: Any, entry: Entry[S] | None) -> None:
        prev = entry.state if entry is not None else None
        state: S | None
        out: list[Envelope]
        if isinstance(obj, Undecodable):
            self.refusals.refuse(obj, reason="undecodable", detail=f"{obj.error}; skipped")
            state, out = prev, []
        else:
            try:
                state, out = await self.handler.upsert(obj, prev)
            except Exception as exc:  # one object's failure must not stop the rest
                self._object_failed(key, rv, exc, obj)
                state, out = prev, []
        # the failed version is remembered too: a re-list or a resumed watch does not retry it
        self.store[key] = Entry(rv=rv, state=state)
        await self._emit_all(out)

    def _object_failed(self, key: str, rv: str, exc: Exception, obj: Any) -> None:
        reason = f"object:{type(exc).__name__}"
        if reason not in self._object_reasons_logged:
            # An exception nobody expected is a bug to fix: its traceback once per type,
            # the rest is counted and dead-lettered by the refusal log.
            self._object_reasons_logged.add(reason)
            log.warning("%s: unexpected failure handling %s", self.name, key, exc_info=True)
        detail = f"{type(exc).__name__}: {exc}; skipped"
        self.refusals.refuse(obj, reason="unexpected", detail=detail)

    async def _drop(self, key: str) -> None:
        entry = self.store.pop(key)
        if entry.state is not None:
            await self._emit_all(await self.handler.delete(entry.state))

    async def _emit_all(self, envelopes: list[Envelope]) -> None:
        for env in envelopes:
            await self.emit(env)
            self.metrics.events.labels(self.name).inc()

    async def restate(self, change: Callable[[S], tuple[S, list[Envelope]]]) -> None:
        """Re-derive stored states (a pod's gang size after its PodGroup changed) and emit
        what changed; no request to the API server."""
        async with self._lock:
            for entry in self.store.values():
                if entry.state is not None:
                    entry.state, out = change(entry.state)
                    await self._emit_all(out)
