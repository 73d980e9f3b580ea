"""The composition root: what every long-running command runs through.

A command parses its options and says which source and which bus; the session does the rest
the same way for all of them, as quixstreams' ``Application`` and ``kopf run`` do: it reads
the settings once (plugins imported, the store's DSN resolved), serves ``/metrics``,
``/livez`` and ``/readyz``, builds the pipeline definition, records the run from its first row
to its last, and attaches the run's outputs through one registry.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

from prometheus_client import CollectorRegistry

from connectors.alerts import AlertDispatcher
from connectors.clickhouse.disk_full import check_room
from connectors.clickhouse.sink import ClickHouseSink
from connectors.clickhouse.store import open_store
from models import GpufragSettings, StoreSettings
from streams.app.lifecycle.history import open_history, store_settings
from streams.app.lifecycle.probes import Health, serve_health_or_exit
from streams.app.lifecycle.run_record import RunRecord, RunSpec
from streams.app.lifecycle.settings_load import load_settings
from streams.app.sinks.output_registry import OUTPUTS, OutputContext
from streams.fragmentation.shapes import TypicalPods
from streams.pipeline import PipelineDef, define_pipeline
from streams.runner.fanout import Fanout, OutputSink, RequestActuator

__all__ = ["Outputs", "Session"]


class Outputs(Fanout):
    """The run's fan-out, with each registered output under its name (a summary reads the
    store's counts)."""

    def __init__(
        self,
        named: dict[str, OutputSink],
        extra: Sequence[OutputSink],
        actuator: RequestActuator | None,
    ) -> None:
        super().__init__([*named.values(), *extra], actuator=actuator)
        self.named = named


class Session:
    def __init__(
        self,
        command: str,
        *,
        store: str | None = None,
        settings: GpufragSettings | None = None,
        registry: CollectorRegistry | None = None,
    ) -> None:
        """``store``: the ``--store`` option (it wins over ``GPUFRAG_STORE__DSN``, which wins
        over the default chDB path); ``settings``: already read by the command (a replay
        reads them before it checks its trace)."""
        self.command = command
        self.settings = settings if settings is not None else load_settings()
        self.store: StoreSettings = store_settings(store, loaded=self.settings)
        self.registry = registry if registry is not None else CollectorRegistry()
        self.health = Health()

    def serve_probes(self, port: int | None, *, addr: str) -> None:
        """``/metrics``, ``/livez`` and ``/readyz`` on ``port`` (None: not served); a port that
        is taken stops the command before it records anything."""
        serve_health_or_exit(port, addr=addr, registry=self.registry, health=self.health)

    def pipeline(
        self, *, typical: TypicalPods | None = None, settings: GpufragSettings | None = None
    ) -> PipelineDef:
        """``settings``: a variant of the session's (a replay with actions on)."""
        return define_pipeline(settings or self.settings, typical=typical)

    @asynccontextmanager
    async def recorded(
        self, info: RunSpec, *, replace: bool = False, need_room: bool = False
    ) -> AsyncIterator[tuple[RunRecord, ClickHouseSink]]:
        """The run recorded as running, and a started sink into the store; the store is
        closed again if either fails (the record owns it from then on and closes it at its
        end); the command stops the sink before it ends the run (its interrupts do, so a
        second Ctrl-C can cut the wait short). ``need_room``: refuse to start on a disk
        already below the store's free-space floor.

        The command adds ``require_store(sink)`` to the readiness checks itself, with its
        others (sources listed, partitions assigned): a check registered alone earlier would
        answer ready before the rest exist."""
        settings = self.store
        store = await asyncio.to_thread(open_history, settings)
        try:
            if need_room:
                await asyncio.to_thread(check_room, store, keep_free_mib=settings.keep_free_mib)
            record = RunRecord(store, info)
            await record.start(replace=replace)
            sink = ClickHouseSink(
                lambda: open_store(settings), settings, registry=self.registry, run_id=info.run_id
            )
            await sink.start()
        except BaseException:
            await asyncio.to_thread(store.close)
            raise
        beat = asyncio.create_task(self.health.heartbeat())
        try:
            yield record, sink
        finally:
            beat.cancel()

    def require_store(self, sink: ClickHouseSink) -> None:
        self.health.require("store writable", lambda: sink.writable)

    def outputs(
        self,
        run_id: str,
        *,
        store: ClickHouseSink | None,
        alerts: AlertDispatcher | None = None,
        actuator: RequestActuator | None = None,
        extra: Sequence[OutputSink] = (),
    ) -> Outputs:
        """Every registered output that has something to do in this run, in registration
        order, then ``extra`` (a command's own: a replay's storm tally)."""
        ctx = OutputContext(
            settings=self.settings,
            run_id=run_id,
            command=self.command,
            store=store,
            alerts=alerts,
            registry=self.registry,
        )
        named: dict[str, OutputSink] = {}
        for name, build in OUTPUTS.items():
            sink = build(ctx)
            if sink is not None:
                named[name] = sink
        return Outputs(named, extra, actuator)
