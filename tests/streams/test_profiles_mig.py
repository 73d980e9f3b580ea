"""Issue 12's first defect: MIG instances of one card each report their own memory, and the
card's figure is their sum, not whichever instance was read last."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from models import Envelope, GpuSample, GpuSampleEvent, Node, NodeEvent
from streams.profiles.node_state import decode_node_state, encode_node_state
from streams.profiles.operators import ProfileJoin

T0 = datetime(2026, 12, 1, tzinfo=UTC)
NODE = Node(
    name="a100-0",
    cpu_milli=64_000,
    memory_mib=262_144,
    gpu_model="A100-80GB",
    gpu_count=1,
    mig_devices={"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 1},
)
# (profile, instance, used MiB, total MiB): what dcgm-exporter reports per instance
INSTANCES = [
    ("3g.40gb", 1, 31_744.0, 40_448.0),
    ("2g.20gb", 5, 0.0, 19_968.0),
    ("1g.10gb", 13, 9_216.0, 9_728.0),
]


def sample(profile: str, instance: int, used: float, total: float, *, at_s: int) -> Envelope:
    gpu = GpuSample(
        node=NODE.name,
        gpu_index=0,
        mig_profile=profile,
        mig_instance=instance,
        memory_used_mib=used,
        memory_total_mib=total,
    )
    return Envelope.wrap(
        GpuSampleEvent(sample=gpu), event_time=T0 + timedelta(seconds=at_s), source="dcgm"
    )


def test_a_mig_card_holds_the_sum_of_its_instances() -> None:
    join = ProfileJoin()
    join.apply(Envelope.wrap(NodeEvent(change="upsert", node=NODE), event_time=T0, source="kube"))
    for i, (profile, instance, used, total) in enumerate(INSTANCES):
        join.apply(sample(profile, instance, used, total, at_s=i + 1))
    card = join.node_profiles[NODE.name].gpus[0]
    assert card.memory_used_mib == 40_960.0  # 31,744 + 0 + 9,216, not the last one read
    assert card.memory_total_mib == 40_448.0 + 19_968.0 + 9_728.0
    assert card.instance_memory_used_mib == {1: 31_744.0, 5: 0.0, 13: 9_216.0}
    # a new reading of one instance replaces that instance only
    join.apply(sample("1g.10gb", 13, 1_024.0, 9_728.0, at_s=10))
    assert join.node_profiles[NODE.name].gpus[0].memory_used_mib == 31_744.0 + 1_024.0


def test_instance_readings_survive_the_node_state_round_trip() -> None:
    join = ProfileJoin()
    join.apply(Envelope.wrap(NodeEvent(change="upsert", node=NODE), event_time=T0, source="kube"))
    for i, (profile, instance, used, total) in enumerate(INSTANCES):
        join.apply(sample(profile, instance, used, total, at_s=i + 1))
    state = join.node_states[NODE.name]
    back = decode_node_state(encode_node_state(state))
    assert back.telemetry == state.telemetry
    assert set(back.telemetry) == {(0, 1), (0, 5), (0, 13)}


def test_a_state_written_before_instances_were_kept_apart_still_reads() -> None:
    old = b'{"v":1,"node":null,"bound":{},"telemetry":{"2":[81920.0,1024.0,null]},"profile":null}'
    assert set(decode_node_state(old).telemetry) == {(2, None)}
