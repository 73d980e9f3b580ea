"""Issue 12, part 2: pods sharing a card each get their own GPU memory figure and peak from
NVML's per-process readings; where a reading cannot split usage, the card says it is shared
and by whom."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from connectors.gpu.reading import NvmlReading, PodRef, ProcessUse, to_sample
from models import (
    Envelope,
    GpuSample,
    GpuSampleEvent,
    Node,
    NodeEvent,
    Pod,
    PodEvent,
    PodPhase,
    ResourceRequest,
)
from models.cards import SharingMode
from streams.profiles.join import PeakReport
from streams.profiles.operators import ProfileJoin

T0 = datetime(2026, 12, 2, tzinfo=UTC)
MIB = 1024 * 1024
NODE = Node(
    name="t4-0",
    cpu_milli=32_000,
    memory_mib=131_072,
    gpu_model="T4",
    gpu_count=1,
    gpu_replicas=4,
    gpu_sharing=SharingMode.TIME_SLICED,
)
UIDS = {"serving/a": "6f1c3b2e-8a7d-4c1e-9b0a-2d3e4f5a6b7c", "serving/b": "0e6b3c72-94d1-4f2a"}


def pod(key: str) -> Pod:
    namespace, name = key.split("/")
    return Pod(
        namespace=namespace,
        name=name,
        uid=UIDS[key],
        phase=PodPhase.RUNNING,
        node=NODE.name,
        requests=ResourceRequest(cpu_milli=500, memory_mib=512, gpu_count=1, gpu_milli=1000),
        created_at=T0,
    )


def wrap(payload: object, at_s: int) -> Envelope:
    return Envelope.wrap(payload, event_time=T0 + timedelta(seconds=at_s), source="test")  # type: ignore[arg-type]


def reading(a_mib: int, b_mib: int) -> NvmlReading:
    return NvmlReading(
        index=0,
        uuid="GPU-1",
        name="Tesla T4",
        memory_total_bytes=15_360 * MIB,
        memory_used_bytes=(a_mib + b_mib + 300) * MIB,
        processes=(ProcessUse(101, a_mib * MIB), ProcessUse(202, b_mib * MIB)),
    )


def by_cgroup(pid: int) -> PodRef:
    # what the sampler knows of a process on a time-sliced card: its cgroup's pod uid
    key = "serving/a" if pid == 101 else "serving/b"
    return PodRef(namespace="", pod=f"uid:{UIDS[key]}")


def joined() -> ProfileJoin:
    join = ProfileJoin()
    join.apply(wrap(NodeEvent(change="upsert", node=NODE), 0))
    for key in UIDS:
        join.apply(wrap(PodEvent(change="upsert", pod=pod(key)), 1))
    return join


def test_each_pod_on_a_time_sliced_card_has_its_own_memory_and_peak() -> None:
    join = joined()
    reported: list[tuple[str, float]] = []
    for i, (a, b) in enumerate([(2_000, 5_000), (9_000, 1_000), (3_000, 1_000)]):
        sample = to_sample(NODE.name, reading(a, b), pod_of_pid=by_cgroup)
        assert sample.pod is None  # the card as a whole belongs to neither
        out = join.apply(wrap(GpuSampleEvent(sample=sample), 10 + i))
        reported += [(o.key, o.used_mib) for o in out if isinstance(o, PeakReport)]
    card = join.node_profiles[NODE.name].gpus[0]
    assert card.pod_memory_mib == {"serving/a": 3_000.0, "serving/b": 1_000.0}
    assert card.memory_used_mib == 4_300.0 and card.memory_shared
    # each pod's peak, reported as it rose and never again below it
    assert reported == [("serving/a", 2_000.0), ("serving/b", 5_000.0), ("serving/a", 9_000.0)]
    assert join.node_states[NODE.name].peaks == {"serving/a": 9_000.0, "serving/b": 5_000.0}


def test_a_card_level_reading_is_marked_shared_with_the_pods_that_share_it() -> None:
    # dcgm-exporter's card figure on a time-sliced card: no pod label it could trust
    join = joined()
    sample = GpuSample(
        node=NODE.name, gpu_index=0, memory_total_mib=15_360.0, memory_used_mib=7_000.0
    )
    out = join.apply(wrap(GpuSampleEvent(sample=sample), 10))
    card = join.node_profiles[NODE.name].gpus[0]
    assert card.memory_shared and card.pods == ("serving/a", "serving/b")
    assert card.pod_memory_mib == {} and card.memory_used_mib == 7_000.0
    assert not [o for o in out if isinstance(o, PeakReport)]  # no pod's own figure


def test_a_process_of_a_pod_not_bound_here_gives_no_figure() -> None:
    join = ProfileJoin()
    join.apply(wrap(NodeEvent(change="upsert", node=NODE), 0))
    sample = to_sample(NODE.name, reading(1_000, 2_000), pod_of_pid=by_cgroup)
    join.apply(wrap(GpuSampleEvent(sample=sample), 10))
    assert join.node_profiles[NODE.name].gpus[0].pod_memory_mib == {}
