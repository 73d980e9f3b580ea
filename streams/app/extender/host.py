"""The extender's process: the kube watchers into the embedded pipeline (no store), and the
verbs served beside it on the same event loop."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import Callable

from aiohttp import web
from rich.console import Console

from connectors.kube.client import api_client_for
from connectors.kube.extender.binder import Binder
from connectors.live_stage import LiveMetrics
from connectors.refusals import RefusalLog
from streams.app.extender.server import ExtenderServer
from streams.app.lifecycle.collector import collector_policy
from streams.app.lifecycle.session import Session
from streams.app.live.sources import (
    Runnable,
    SourcePlan,
    build_sources,
    live_stage,
    require_listed,
    run_live,
)
from streams.app.live.to_store import together
from streams.extender.assumed import AssumeCache
from streams.extender.scores import make_scorer
from streams.extender.verbs import Extender
from streams.runner.embedded import EmbeddedRunner
from streams.runner.fanout import Fanout
from streams.runner.live_stream import LiveStream

__all__ = ["BIND_TIMEOUT_S", "serve"]

BIND_TIMEOUT_S = 4.0
"""Inside kube-scheduler's default 5 s extender timeout: a bind that waits longer on the API
server is answered as failed (the scheduler retries the pod) rather than timed out."""


def settled_check(runs: list[tuple[str, Runnable]], *, after_s: float) -> Callable[[], bool]:
    """True once every watcher has listed, and ``after_s`` (the live stage's hold) later."""
    listers = [f for _, src in runs if callable(f := getattr(src, "listed", None))]
    listed_at: list[float] = []

    def settled() -> bool:
        if not listed_at:
            if not all(f() for f in listers):
                return False
            listed_at.append(time.monotonic())
        return time.monotonic() - listed_at[0] >= after_s

    return settled


async def serve(
    session: Session, *, scorer_name: str, addr: str, port: int, duration_s: float | None
) -> int:
    settings, registry, health = session.settings, session.registry, session.health
    es = settings.extender
    console = Console(stderr=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    collector_policy()  # this process holds the cluster's state: see its module
    async with contextlib.AsyncExitStack() as stack:
        refusals = RefusalLog(registry=registry)  # counted and logged: no store here
        plan = SourcePlan.of(kube=True, dcgm=(), dcgm_discover=False, nvml_node=None, named=())
        sources = await build_sources(plan, settings, registry, stack, refusals=refusals)
        pipeline = session.pipeline().build()
        stream = LiveStream()
        metrics = LiveMetrics(registry)
        stage = live_stage("extender", stream, metrics, settings.watch)
        runs = [(s.name, s.build(stage.emitter(s.name))) for s in sources]
        require_listed(health, runs)
        settled = settled_check(runs, after_s=es.ready_after_s)
        health.require("view settled", settled)
        api = await api_client_for(settings.kube)
        stack.push_async_callback(api.close)
        server = ExtenderServer(
            Extender(
                scorer=make_scorer(scorer_name, seed=es.seed),
                assumed=AssumeCache(ttl_s=es.assume_ttl_s),
            ),
            view=lambda: pipeline.cluster.view,
            ready=settled,
            binder=Binder(api, timeout_s=BIND_TIMEOUT_S),
            guardrails=settings.guardrails,
            registry=registry,
        )
        web_runner = web.AppRunner(server.app(), access_log=None)
        await web_runner.setup()
        stack.push_async_callback(web_runner.cleanup)
        await web.TCPSite(web_runner, addr, port).start()
        console.print(
            f"extender ({scorer_name}) serving on http://{addr}:{port}/ "
            "(filter, prioritize, bind, preempt)",
            highlight=False,
            soft_wrap=True,
        )
        runner = EmbeddedRunner(
            source=stream, output=Fanout([]), pipeline=pipeline, registry=registry
        )

        async def live() -> None:
            try:
                await run_live(
                    runs, [stage], stop=stop, metrics=metrics, duration_s=duration_s, health=health
                )
            finally:
                stream.end()

        await together(runner.run(), live())
    console.print(
        f"extender stopped: {runner.processed} events into the view, "
        f"{refusals.total()} refused inputs",
        highlight=False,
    )
    return 0
