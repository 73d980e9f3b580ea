"""A toy live source: two GPU nodes and a pod on one of them, emitted once at start, then
nothing until the watch stops. Loaded by ``GPUFRAG_PLUGINS='["tests.extensions.toy_source"]'``
and run by ``gpufrag watch --source toy``; the last line is its registration."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from connectors.live_stage import Emit
from models import Envelope, EventKind, NodeEvent, PodEvent
from models.node import Node
from models.pod import Pod
from models.resources import ResourceRequest
from streams.app.live.source_registry import LIVE_SOURCES, LiveSource, Runnable, SourceContext

NODES = ("toy-node-a", "toy-node-b")
POD = "toy-pod"


class ToySource:
    def __init__(self, emit: Emit) -> None:
        self.emit = emit

    async def run(self, *, stop: asyncio.Event) -> None:
        now = datetime.now(UTC)
        for name in NODES:
            node = Node(
                name=name, cpu_milli=64_000, memory_mib=512_000, gpu_model="H100", gpu_count=8
            )
            upsert = NodeEvent(change="upsert", node=node)
            await self.emit(Envelope.wrap(upsert, event_time=now, source="toy"))
        pod = Pod(
            namespace="toy",
            name=POD,
            uid="toy-uid-1",
            phase="Running",
            node=NODES[0],
            requests=ResourceRequest(
                cpu_milli=4_000, memory_mib=16_000, gpu_count=1, gpu_milli=1000
            ),
            gpu_indices=(0,),
            created_at=now,
        )
        await self.emit(
            Envelope.wrap(PodEvent(change="upsert", pod=pod), event_time=now, source="toy")
        )
        await stop.wait()


async def toy_source(ctx: SourceContext) -> LiveSource:
    def build(emit: Emit) -> Runnable:
        return ToySource(emit)

    return LiveSource(f"toy@{ctx.host}", (EventKind.NODE, EventKind.POD), build)


LIVE_SOURCES.register("toy", toy_source)
