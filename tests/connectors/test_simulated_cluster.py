"""The simulated cluster's event stream, checked against the operators that consume it."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from connectors.trace.alibaba_csv import read_nodes, read_pods
from connectors.trace.bundled import bundled_nodes_path, bundled_pods_path
from models import Envelope, PodEvent, PodPhase, SchedulingEvent
from streams.app.replaying.workload import load_nodes, pod_shape, specs
from streams.cluster_analysis import ClusterAnalysis
from streams.fragmentation.shapes import TypicalPods
from streams.placement.experiment import run_seed
from streams.profiles.operators import ProfileJoin
from streams.simulation.cluster import (
    ReplayOptions,
    SimulatedCluster,
    TraceMode,
    TraceReplayError,
)

FAILED = re.compile(
    r"^0/(\d+) nodes are available: \d+ [^,]+(, \d+ [^,]+)*\. preemption: 0/\1 nodes are "
    r"available: \1 No preemption victims found for incoming pod\.$"
)


def consume(events: list[Envelope], typical: TypicalPods) -> tuple[ProfileJoin, ClusterAnalysis]:
    join = ProfileJoin()
    analysis = ClusterAnalysis(typical=typical)
    for env in events:
        for update in join.apply(env):
            analysis.apply(update)
        analysis.advance(env.event_time)
    analysis.flush()
    return join, analysis


def test_fgd_mode_stream_matches_the_protocol_and_the_operators() -> None:
    nodes = read_nodes(bundled_nodes_path())
    pods = read_pods(bundled_pods_path())
    typical = TypicalPods.from_shapes(map(pod_shape, pods))
    sim = SimulatedCluster(nodes, pods, options=ReplayOptions(mode=TraceMode.FGD, seed=42))
    events = list(sim.events())
    assert len({e.id for e in events}) == len(events)
    stats = sim.stats
    assert stats.bound + stats.failed_attempts == stats.pods
    failed = [e.payload.event for e in events if isinstance(e.payload, SchedulingEvent)]
    assert len(failed) == stats.failed_attempts > 0
    assert all(FAILED.match(ev.message) for ev in failed), failed[0].message
    # the same seed through the experiment runner places every pod the same way
    rec = run_seed(
        load_nodes(bundled_nodes_path()),
        specs(pods),
        policy="fgd",
        seed=42,
        typical=typical,
    )
    assert rec.placed == stats.bound
    join, analysis = consume(events, typical)
    assert analysis.index.frag_milli == pytest.approx(sim.cluster.frag_milli, abs=1e-6)
    assert analysis.summary().frag_amount_pct == pytest.approx(rec.frag_amount_pct[-1])
    assert sum(len(p.pods) for p in join.node_profiles.values()) == stats.bound


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


HEADER = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
HEADER += "deletion_time,scheduled_time\n"


def test_timeline_retries_pending_pods_when_a_deletion_frees_room(tmp_path: Path) -> None:
    nodes = read_nodes(
        write(tmp_path / "nodes.csv", "sn,cpu_milli,memory_mib,gpu,model\nn0,32000,65536,2,T4\n")
    )
    pods = read_pods(
        write(
            tmp_path / "pods.csv",
            HEADER
            + "big,8000,1024,2,1000,,LS,Running,0,100,0\n"
            + "small,4000,1024,1,500,,LS,Running,10,200,10\n"
            + "late,4000,1024,1,1000,,BE,Running,20,300,20\n",
        )
    )
    sim = SimulatedCluster(nodes, pods, options=ReplayOptions(mode=TraceMode.TIMELINE))
    events = list(sim.events())
    seq = []
    for e in events:
        p = e.payload
        if isinstance(p, PodEvent):
            seq.append(
                (
                    p.pod.name,
                    p.change,
                    p.pod.phase.value,
                    p.pod.node,
                    (e.event_time - sim.start).total_seconds(),
                )
            )
        elif isinstance(p, SchedulingEvent):
            seq.append(
                (
                    p.event.pod_name,
                    "FailedScheduling",
                    "",
                    None,
                    (e.event_time - sim.start).total_seconds(),
                )
            )
    assert seq == [
        ("big", "upsert", "Pending", None, 0.0),
        ("big", "upsert", "Running", "n0", 0.0),
        ("small", "upsert", "Pending", None, 10.0),
        ("small", "FailedScheduling", "", None, 10.0),
        ("late", "upsert", "Pending", None, 20.0),
        ("late", "FailedScheduling", "", None, 20.0),
        ("big", "delete", "Pending", None, 100.0),
        ("small", "upsert", "Running", "n0", 100.0),  # retried in creation order
        ("late", "upsert", "Running", "n0", 100.0),
        ("small", "delete", "Pending", None, 200.0),
        ("late", "delete", "Pending", None, 300.0),
    ]
    join, analysis = consume(events, TypicalPods.from_shapes(map(pod_shape, pods)))
    assert join.tasks == {} and join.node_profiles["n0"].pods == ()
    assert analysis.index.idle_milli == 2000


def test_timeline_needs_creation_times(trace_dir: Path) -> None:
    nodes = read_nodes(bundled_nodes_path())
    short = read_pods(trace_dir / "openb_pod_list_multigpu20.csv")
    sim = SimulatedCluster(nodes, short, options=ReplayOptions(mode=TraceMode.TIMELINE))
    with pytest.raises(TraceReplayError, match="no creation_time; timeline mode needs"):
        list(sim.events())
    phases = Counter(
        e.payload.pod.phase
        for e in SimulatedCluster(
            nodes, short, options=ReplayOptions(mode=TraceMode.FGD, node_limit=50)
        ).events()
        if isinstance(e.payload, PodEvent)
    )
    assert phases[PodPhase.RUNNING] > 0 and phases[PodPhase.PENDING] > 0


def test_bad_options_are_refused() -> None:
    nodes = read_nodes(bundled_nodes_path())
    pods = read_pods(bundled_pods_path())
    with pytest.raises(TraceReplayError, match="node_limit"):
        SimulatedCluster(nodes, pods, options=ReplayOptions(node_limit=0))
    with pytest.raises(ValueError, match="unknown placement policy"):
        SimulatedCluster(nodes, pods, options=ReplayOptions(policy="tetris"))
