"""A pod's GPU memory peak is kept by its node's half of the join, which reads the samples and
the pod's binding in event-time order, and is reported as history when it rises. Before, the
peak went back to the pod's half: the Faust worker's copy came over Kafka unordered, after a
short-lived pod was gone, and 18 task rows of the embedded run had no match in the workers'.
State saved by that version must still load."""

from __future__ import annotations

import orjson
import pytest
from pydantic import ValidationError

from connectors.gpu.reading import PodRef, to_sample
from models import GpuSampleEvent, NodeEvent, PodEvent, TaskProfile
from streams.profiles.join import NodeState, PeakReport, TaskProfileUpdate
from streams.profiles.node_state import decode_node_state, encode_node_state
from streams.profiles.operators import ProfileJoin, TaskJoin
from tests.streams.oom_incident import AGGRESSOR, at, by_cgroup, node, pod, reading, wrap


def _peaks(out: list[object]) -> list[tuple[str, str, float]]:
    return [(o.key, o.node, o.used_mib) for o in out if isinstance(o, PeakReport)]


def test_a_short_lived_pods_peak_is_reported_before_it_is_gone() -> None:
    join = ProfileJoin()
    join.apply(wrap(NodeEvent(change="upsert", node=node("ts-0")), 0))
    join.apply(wrap(PodEvent(change="upsert", pod=pod(AGGRESSOR, "ts-0")), 1))
    sample = to_sample("ts-0", reading(30_000), pod_of_pid=by_cgroup)
    out = join.apply(wrap(GpuSampleEvent(sample=sample), 2))
    assert _peaks(out) == [(AGGRESSOR, "ts-0", 30_000.0)]
    # the same reading again is no new peak; a lower one neither
    assert _peaks(join.apply(wrap(GpuSampleEvent(sample=sample), 3))) == []
    lower = to_sample("ts-0", reading(10_000), pod_of_pid=by_cgroup)
    assert _peaks(join.apply(wrap(GpuSampleEvent(sample=lower), 4))) == []
    # deleted a second later: its peak was out already, and the node forgets it
    gone = join.apply(wrap(PodEvent(change="delete", pod=pod(AGGRESSOR, "ts-0")), 5))
    assert [o.profile for o in gone if isinstance(o, TaskProfileUpdate)] == [None]
    assert AGGRESSOR not in join.node_states["ts-0"].peaks
    # a pod of the same name later starts from nothing
    join.apply(wrap(PodEvent(change="upsert", pod=pod(AGGRESSOR, "ts-0")), 6))
    assert _peaks(join.apply(wrap(GpuSampleEvent(sample=lower), 7))) == [
        (AGGRESSOR, "ts-0", 10_000.0)
    ]


def test_a_reading_of_a_pod_not_bound_to_the_node_keeps_nothing() -> None:
    join = ProfileJoin()
    join.apply(wrap(NodeEvent(change="upsert", node=node("ts-0")), 0))
    # the sampler names the process's pod, but no binding of it reached this node (yet)
    sample = to_sample("ts-0", reading(30_000), pod_of_pid=_by_name)
    assert _peaks(join.apply(wrap(GpuSampleEvent(sample=sample), 2))) == []
    assert join.node_states["ts-0"].peaks == {}


def _by_name(pid: int) -> PodRef:
    ns, name = AGGRESSOR.split("/")
    return PodRef(namespace=ns, pod=name)


def test_node_state_keeps_its_peaks_and_loads_without_them() -> None:
    st = NodeState(peaks={AGGRESSOR: 30_000.0})
    assert decode_node_state(encode_node_state(st)).peaks == {AGGRESSOR: 30_000.0}
    older = orjson.loads(encode_node_state(NodeState()))
    del older["peaks"]  # saved before the node's half kept peaks
    assert decode_node_state(orjson.dumps(older)).peaks == {}


def test_task_state_saved_while_the_pod_half_kept_peaks_still_loads() -> None:
    profile = TaskProfile.of_pod(pod(AGGRESSOR, "ts-0"))
    old = {**profile.model_dump(mode="json"), "gpu_memory_peak_mib": 30_000.0}
    join = TaskJoin()
    join.restore(
        {
            AGGRESSOR: orjson.dumps({"profile": old, "seen_at": at(9).isoformat()}),
            "serving/v1": orjson.dumps({**old, "key": "serving/v1"}),
        }
    )
    assert join.tasks[AGGRESSOR] == profile
    assert join.tasks["serving/v1"].key == "serving/v1"
    # and a renamed field is still refused: only the moved one is dropped
    bad = {**profile.model_dump(mode="json"), "gpu_memory_peak": 1.0}
    with pytest.raises(ValidationError, match="gpu_memory_peak"):
        TaskProfile.model_validate(bad)
