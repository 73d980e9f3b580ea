"""A reduced trace replayed through the embedded runner with storms injected, and what came out:
the storm signals, the OOMs the join counted, and the injector's record of what went in."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from connectors.trace.alibaba_csv import TraceNode, TracePod, read_nodes, read_pods
from connectors.trace.bundled import bundled_nodes_path, bundled_pods_path
from models import Envelope, GpufragSettings, Signal, SignalKind
from streams.app.replaying.workload import pod_shape
from streams.fragmentation.shapes import TypicalPods
from streams.pipeline import define_pipeline
from streams.profiles.join import TaskProfileUpdate
from streams.runner.embedded import EmbeddedRunner, Emission, Failure
from streams.simulation.cluster import ReplayOptions, SimulatedCluster, TraceMode
from streams.simulation.storm_tally import StormTally

NODE_LIMIT = 40
POD_STRIDE = 20
"""Every 20th pod of the bundled list: 408 pods over the trace's 149 days, about 1,300 events,
so a seed replays in about a second."""


def reduced_trace() -> tuple[list[TraceNode], list[TracePod]]:
    nodes = read_nodes(bundled_nodes_path())[:NODE_LIMIT]
    return nodes, read_pods(bundled_pods_path())[::POD_STRIDE]


@dataclass
class Collected:
    """The embedded runner's output, kept in memory."""

    tally: StormTally
    storms: list[Signal] = field(default_factory=list)
    oom_counts: dict[str, int] = field(default_factory=dict)
    failures: list[Failure] = field(default_factory=list)

    async def emit(self, item: Emission) -> None:
        for signal in item.signals():
            self.tally.observe(signal)
            if signal.kind == SignalKind.OOM_STORM:
                self.storms.append(signal)
        for out in item.deltas:
            if isinstance(out, TaskProfileUpdate) and out.profile and out.profile.oom_count:
                self.oom_counts[out.key] = out.profile.oom_count

    async def dead_letter(self, failure: Failure) -> None:
        self.failures.append(failure)


def simulated(mode: TraceMode, seed: int, storms: int) -> SimulatedCluster:
    nodes, pods = reduced_trace()
    options = ReplayOptions(mode=mode, seed=seed, inject_oom_storms=storms, ratio=1.3)
    return SimulatedCluster(nodes, pods, options=options)


def run(source: list[Envelope], pods: list[TracePod]) -> Collected:
    settings = GpufragSettings()
    out = Collected(StormTally(settings.detectors.oom_storm))
    typical = TypicalPods.from_shapes(map(pod_shape, pods))
    pipeline = define_pipeline(settings, typical=typical).build()
    asyncio.run(EmbeddedRunner(source=iter(source), output=out, pipeline=pipeline).run())
    assert not out.failures, out.failures[:3]
    return out
