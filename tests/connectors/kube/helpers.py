"""Helpers for the watcher tests: the source's ``emit`` as a collector, settings with short
waits, and a source running in the background."""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator, Callable
from typing import Any

from kubernetes_asyncio.client import ApiClient
from prometheus_client import CollectorRegistry

from connectors.kube import KubeSource
from connectors.refusals import RefusalLog
from models import Envelope, KubeResource, KubeSettings
from models.refusal import Refusal

__all__ = ["Collector", "Kept", "kube_settings", "running"]


class Collector:
    """The source's ``emit``: keeps every envelope and lets a test wait for a condition."""

    def __init__(self) -> None:
        self.envelopes: list[Envelope] = []
        self._changed = asyncio.Event()

    async def emit(self, env: Envelope) -> None:
        self.envelopes.append(env)
        self._changed.set()

    def since(self, mark: int) -> list[Envelope]:
        return self.envelopes[mark:]

    async def wait_for(self, predicate: Callable[[], bool], timeout: float = 3.0) -> None:
        async def loop() -> None:
            while not predicate():
                self._changed.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), 0.05)

        await asyncio.wait_for(loop(), timeout)

    async def quiet(self, seconds: float = 0.3) -> None:
        """Let the source run a while (to show nothing more arrives)."""
        await asyncio.sleep(seconds)


def kube_settings(*resources: KubeResource, **overrides: Any) -> KubeSettings:
    """Short waits, so outages and retries fit in a fast test (options, not test hooks)."""
    values: dict[str, Any] = {
        "resources": resources or (KubeResource.PODS,),
        "backoff_initial_s": 0.02,
        "backoff_max_s": 0.1,
        "request_timeout_s": 2.0,
        "watch_timeout_s": 30.0,
        "missing_recheck_s": 600.0,
        "page_size": 50,
    }
    values.update(overrides)
    return KubeSettings(**values)


@contextlib.asynccontextmanager
async def running(
    api_client: ApiClient,
    settings: KubeSettings,
    collector: Collector,
    *,
    registry: CollectorRegistry | None = None,
    refusals: RefusalLog | None = None,
) -> AsyncIterator[KubeSource]:
    """A KubeSource running in the background for the block's duration."""
    registry = registry or CollectorRegistry()
    source = KubeSource(
        api_client=api_client,
        settings=settings,
        emit=collector.emit,
        registry=registry,
        refusals=refusals or RefusalLog(registry=registry),
        rng=random.Random(7),
    )
    stop = asyncio.Event()
    task = asyncio.create_task(source.run(stop=stop))
    try:
        yield source
    finally:
        stop.set()
        await asyncio.wait_for(task, 5.0)


class Kept:
    """The refusal log's dead-letter sink, as the store or topic would take them."""

    def __init__(self) -> None:
        self.refusals: list[Refusal] = []

    def __call__(self, refusal: Refusal) -> None:
        self.refusals.append(refusal)
