"""The four verbs over HTTP, answered from memory in the event loop that also feeds the view.

Handlers run between the pipeline's steps on one event loop, so each answer reads one
consistent view with no lock, and never calls the API server except to bind. Every answer is
HTTP 200 with the protocol's own error field, except a request that is not the protocol
(400): kube-scheduler treats both as the extender failing, skips it (it is ignorable) and
logs the reason.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Protocol

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from connectors.kube.extender import wire
from connectors.kube.extender.binder import BindError
from models import Pod, TaskProfile
from models.settings import GuardrailSettings
from streams.cluster.view import ClusterView
from streams.extender.verbs import Extender
from streams.profiles.join import task_profile

__all__ = ["MAX_REQUEST_BYTES", "BindPort", "ExtenderServer"]

log = logging.getLogger(__name__)

MAX_REQUEST_BYTES = 256 * 1024**2
"""Without nodeCacheCapable the scheduler sends every candidate Node whole, managed fields
included: about 6 KiB a node, 60 MiB at 10,000 nodes."""

RECENT_MAX = 10_000
"""Pods whose filter call was answered and whose bind has not come: the scheduling queue's
in-flight pods, a handful; the bound keeps a scheduler that never binds from growing it."""

VERBS = ("filter", "prioritize", "bind", "preempt")


class BindPort(Protocol):
    async def bind(self, args: wire.BindingArgs, *, cards: tuple[int, ...]) -> None: ...


class _Metrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        requests = Counter(
            "gpufrag_extender_requests_total",
            "Extender calls from kube-scheduler, by verb and outcome (ok, refused: not the "
            "protocol, failed: answered with an error)",
            ["verb", "outcome"],
            registry=registry,
        )
        seconds = Histogram(
            "gpufrag_extender_request_seconds",
            "Time to answer one extender call, by verb",
            ["verb"],
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
            registry=registry,
        )
        self.outcome = {
            (v, o): requests.labels(v, o) for v in VERBS for o in ("ok", "refused", "failed")
        }
        self.seconds = {v: seconds.labels(v) for v in VERBS}
        self.assumed = Gauge(
            "gpufrag_extender_assumed_pods",
            "Pods bound by the extender that the watch does not show bound yet",
            registry=registry,
        )
        self.unknown_nodes = Counter(
            "gpufrag_extender_unknown_nodes_total",
            "Nodes a filter call named that the view does not know (passed without a check)",
            registry=registry,
        )


class ExtenderServer:
    def __init__(
        self,
        extender: Extender,
        *,
        view: Callable[[], ClusterView],
        ready: Callable[[], bool],
        binder: BindPort,
        guardrails: GuardrailSettings,
        registry: CollectorRegistry,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        """``view``: the live view now (the pipeline's cluster operator holds it); ``ready``:
        whether it shows the whole cluster yet (until then nodes pass with no score and
        binds take no card choice: a half-built view would overstate the room)."""
        self.extender = extender
        self._view = view
        self._ready = ready
        self._binder = binder
        self._guardrails = guardrails
        self._monotonic = monotonic
        self._metrics = _Metrics(registry)
        self._recent: dict[str, TaskProfile] = {}
        self._pods = wire.PodCache()

    def app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_REQUEST_BYTES)
        for verb, handler in (
            ("filter", self._filter),
            ("prioritize", self._prioritize),
            ("bind", self._bind),
            ("preempt", self._preempt),
        ):
            app.router.add_post(f"/{verb}", self._timed(verb, handler))
        return app

    def _timed(
        self, verb: str, handler: Callable[[bytes], Awaitable[tuple[bytes, str]]]
    ) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def handle(request: web.Request) -> web.Response:
            t0 = self._monotonic()
            body = await request.read()
            try:
                reply, outcome = await handler(body)
            except wire.ExtenderRequestError as exc:
                self._metrics.outcome[(verb, "refused")].inc()
                log.warning("extender %s: refused a request: %s", verb, exc)
                return web.Response(status=400, text=f"gpufrag extender: {verb}: {exc}\n")
            self._metrics.outcome[(verb, outcome)].inc()
            self._metrics.seconds[verb].observe(self._monotonic() - t0)
            self._metrics.assumed.set(len(self.extender.assumed))
            return web.Response(body=reply, content_type="application/json")

        return handle

    def _now_view(self) -> ClusterView:
        view = self._view()
        self.extender.assumed.settle(view, self._monotonic())
        return view

    @staticmethod
    def _task(view: ClusterView, pod: Pod) -> TaskProfile:
        return task_profile(pod, view.tasks.get(pod.key), at=datetime.now(UTC))

    async def _filter(self, body: bytes) -> tuple[bytes, str]:
        args = wire.extender_args(body, now=datetime.now(UTC), pods=self._pods)
        view = self._now_view()
        if not self._ready():
            return wire.filter_result(args, args.names, failed={}, unresolvable={}), "ok"
        task = self._task(view, args.pod)
        self._remember(task)
        out = self.extender.filter(view, task, args.names)
        if out.unknown:
            self._metrics.unknown_nodes.inc(out.unknown)
        reply = wire.filter_result(
            args, out.passed, failed=out.failed, unresolvable=out.unresolvable
        )
        return reply, "ok"

    async def _prioritize(self, body: bytes) -> tuple[bytes, str]:
        args = wire.extender_args(body, now=datetime.now(UTC), pods=self._pods)
        view = self._now_view()
        if not self._ready():
            return wire.priority_list([(n, 0) for n in args.names]), "ok"
        scores = self.extender.prioritize(view, self._task(view, args.pod), args.names)
        return wire.priority_list(scores), "ok"

    async def _bind(self, body: bytes) -> tuple[bytes, str]:
        args = wire.binding_args(body)
        view = self._now_view()
        # the pod as the filter saw it: a pod created a moment ago may not be in the view yet
        task = self._recent.pop(args.key, None) or view.tasks.get(args.key)
        if not self._ready():
            task = None  # no card choice from a half-built view: the device plugin's
        cards: tuple[int, ...] = ()
        if task is not None:
            try:
                choice = self.extender.choose_cards(view, task, args.node)
            except ValueError as exc:
                return wire.binding_result(str(exc)), "failed"
            cards = choice.cards
            # charged before the call: another bind answered while this one waits on the
            # API server must not be handed the same cards
            self.extender.assume(task, choice, now_s=self._monotonic())
        try:
            await self._binder.bind(args, cards=cards)
        except BindError as exc:
            if task is not None:
                self.extender.assumed.drop(task.key)
            return wire.binding_result(f"binding {args.key} to {args.node}: {exc}"), "failed"
        return wire.binding_result(), "ok"

    def _remember(self, task: TaskProfile) -> None:
        """The pod of a filter call, for its bind (which names the pod only)."""
        recent = self._recent
        recent.pop(task.key, None)
        recent[task.key] = task
        if len(recent) > RECENT_MAX:
            del recent[next(iter(recent))]

    async def _preempt(self, body: bytes) -> tuple[bytes, str]:
        args = wire.preemption_args(body, now=datetime.now(UTC))
        view = self._now_view()
        if not self._ready():
            return wire.preemption_result(args.victims), "ok"
        kept = self.extender.preempt(
            view, self._task(view, args.pod), args.victims, guardrails=self._guardrails
        )
        return wire.preemption_result({v.node: (v.uids, v.pdb_violations) for v in kept}), "ok"
