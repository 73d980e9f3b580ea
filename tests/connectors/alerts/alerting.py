"""What the alert tests share: signals as the detectors make them, a dead-letter collector,
settings with short timers, a dispatcher that is started and stopped around a block, and a
wait for a condition with a generous deadline."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from prometheus_client import CollectorRegistry

from connectors.alerts import AlertDispatcher, AlertSink
from models import Scope, Severity, Signal, SignalKind, fingerprint_of
from models.refusal import Refusal
from models.settings import AlertSettings

OPENED = datetime(2026, 3, 2, 9, 30, tzinfo=UTC)


def storm(node: str = "gpu-h200-07", *, resolved_after_s: float | None = None) -> Signal:
    """An OOM storm on a node, as the detector opens it (and resolves it)."""
    sig = Signal(
        kind=SignalKind.OOM_STORM,
        scope=Scope.NODE,
        scope_id=node,
        severity=Severity.CRITICAL,
        fingerprint=fingerprint_of(SignalKind.OOM_STORM, Scope.NODE, node),
        summary=f"OOM storm on node {node}: 5 OOMs in 120 s, 5 pods; suspected aggressor a/b",
        evidence={"ooms": 5, "window_s": 120.0, "victims": ["a/v1", "a/v2"], "aggressor": "a/b"},
        opened_at=OPENED,
    )
    if resolved_after_s is None:
        return sig
    return sig.resolved(OPENED + timedelta(seconds=resolved_after_s))


def namespace_storm(namespace: str, queue: str) -> Signal:
    scope_id = f"{namespace}/{queue}"
    return Signal(
        kind=SignalKind.OOM_STORM,
        scope=Scope.NAMESPACE,
        scope_id=scope_id,
        severity=Severity.WARNING,
        fingerprint=fingerprint_of(SignalKind.OOM_STORM, Scope.NAMESPACE, scope_id),
        summary=f"OOM storm in namespace {scope_id}",
        evidence={"ooms": 10},
        opened_at=OPENED,
    )


def settings(**changes: Any) -> AlertSettings:
    base: dict[str, Any] = {
        "cluster": "test-cluster",
        "runbook_base_url": "https://runbooks.example/gpufrag/",
        "resend_interval_s": 1.0,
        "timeout_s": 2.0,
        "retry_initial_s": 0.05,
        "retry_max_s": 0.5,
        "give_up_after_s": 120.0,  # outages in these tests are shorter; a test that wants
        # dead letters lowers it
    }
    return AlertSettings(**{**base, **changes})


class DeadLetters:
    def __init__(self) -> None:
        self.kept: list[Refusal] = []
        self.fail = False

    async def __call__(self, refusal: Refusal) -> None:
        if self.fail:
            raise OSError("dead-letter store down")
        self.kept.append(refusal)


@asynccontextmanager
async def dispatching(
    sinks: list[AlertSink], alert_settings: AlertSettings, dead: DeadLetters
) -> AsyncIterator[tuple[AlertDispatcher, CollectorRegistry]]:
    registry = CollectorRegistry()
    dispatcher = AlertDispatcher(
        sinks, settings=alert_settings, dead_letter=dead, registry=registry
    )
    await dispatcher.start()
    try:
        yield dispatcher, registry
    finally:
        await dispatcher.stop(drain_s=5.0)


async def until(
    cond: Callable[[], Awaitable[bool]] | Callable[[], bool], *, within_s: float = 60.0
) -> None:
    """Poll ``cond`` (plain or async) until it holds; 60 s is generous for a busy 2-core box."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within_s
    while True:
        got = cond()
        if asyncio.iscoroutine(got):
            got = await got
        if got:
            return
        if loop.time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.05)


def metric(registry: CollectorRegistry, name: str, **labels: str) -> float:
    return registry.get_sample_value(name, labels) or 0.0
