"""Where a run's outputs go: a name mapped to a builder, for the store, alert sinks, the
domain metrics (``domain_metrics.py``) and any sink a plugin registers
(``OUTPUTS.register("my_sink", build)`` in a module named by ``GPUFRAG_PLUGINS``).

A builder gets what the session has built for this run and returns a sink, or None when it
has nothing to do in this run (no store, no alert sink configured, its own setting off). The
actuator is not among them: it changes what the sinks see (requests become the records of
what was done), so the session hands it to the fan-out itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from prometheus_client import CollectorRegistry

from connectors.alerts import AlertDispatcher
from connectors.clickhouse.sink import ClickHouseSink
from models import GpufragSettings, Signal
from models.component_registry import Registry
from streams.app.sinks.domain_metrics import domain_metrics_for
from streams.app.sinks.store_output import StoreOutput
from streams.runner.embedded import Emission, Failure
from streams.runner.fanout import OutputSink

__all__ = ["OUTPUTS", "OutputContext", "SignalsTo"]


@dataclass(frozen=True, slots=True, kw_only=True)
class OutputContext:
    settings: GpufragSettings
    run_id: str
    command: str
    """The command being run (``replay``, ``watch``): an output may serve only some."""
    store: ClickHouseSink | None = None
    alerts: AlertDispatcher | None = None
    registry: CollectorRegistry | None = None
    """The session's metrics registry, which its ``/metrics`` serves; None: no metrics."""


OutputBuilder = Callable[[OutputContext], OutputSink | None]
OUTPUTS: Registry[OutputBuilder] = Registry("output")


class SignalsTo:
    """A sink of one channel: each signal, in order, to a function (an alert dispatcher's
    queue, a replay's storm tally)."""

    def __init__(self, take_signal: Callable[[Signal], object]) -> None:
        self.take_signal = take_signal

    async def take(self, item: Emission) -> None:
        for signal in item.signals():
            self.take_signal(signal)

    async def dead_letter(self, failure: Failure) -> None:
        del failure


def _store(ctx: OutputContext) -> OutputSink | None:
    return None if ctx.store is None else StoreOutput(ctx.store, run_id=ctx.run_id)


def _alerts(ctx: OutputContext) -> OutputSink | None:
    return None if ctx.alerts is None else SignalsTo(ctx.alerts.submit)


def _metrics(ctx: OutputContext) -> OutputSink | None:
    return None if ctx.registry is None else domain_metrics_for(ctx.registry)


OUTPUTS.register("store", _store)
OUTPUTS.register("alerts", _alerts)
OUTPUTS.register("metrics", _metrics)
