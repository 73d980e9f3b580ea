"""OOM events from the sources besides a container's own kill, through the join and the cluster
operator: the kubelet's SystemOOM events (the node's kernel OOM killer) and pods held at their
GPU memory limit (the near_memory_limit signal). Defaults: a node storm at 5 OOMs in 120 s, a
card storm at 3 in 60 s; near_memory_limit at 95 % of the limit for 60 s."""

from __future__ import annotations

from models import (
    Envelope,
    GpufragSettings,
    GpuSample,
    GpuSampleEvent,
    NodeEvent,
    Signal,
)
from models.cards import SharingMode
from streams.pipeline import Pipeline, define_pipeline
from streams.profiles.system_oom import victim_of
from tests.streams.kernel_ooms import at, kernel_incident, node_of, pod, system_oom, wrap
from tests.streams.pipeline_feed import feed


def run(envs: list[Envelope], until_s: float) -> tuple[Pipeline, list[Signal]]:
    p = define_pipeline(GpufragSettings()).build()
    out: list[Signal] = []
    for env in [*envs, wrap(NodeEvent(change="upsert", node=node_of("tick")), until_s)]:
        out += feed(p, env)
    return p, [s for s in out if s.kind == "oom_storm"]


def test_kernel_oom_kills_on_a_node_open_a_node_storm_naming_the_processes() -> None:
    p, storms = run(kernel_incident(5), until_s=1_000)
    assert [(s.state, s.scope.value, s.scope_id) for s in storms] == [
        ("open", "node", "cpu-gpu-0"),
        ("resolved", "node", "cpu-gpu-0"),
    ]
    opened = storms[0]
    assert opened.opened_at == at(100)  # the fifth kill, 40 s after the first
    assert opened.evidence["victims"] == [f"cpu-gpu-0: python3 (pid {4_000 + i})" for i in range(5)]
    assert opened.evidence["aggressor"] == "batch/hog"  # grew 19,000 MiB before the first kill
    assert storms[1].resolved_at == at(400)
    profile = p.join.node_profiles["cpu-gpu-0"]
    assert (profile.system_oom_count, profile.last_system_oom) == (
        5,
        "cpu-gpu-0: python3 (pid 4004)",
    )


def test_a_kernel_oom_seen_again_is_not_counted_again() -> None:
    envs = kernel_incident(4)
    # the watcher's re-list sends the last kill again: the same event, the same id
    _, storms = run([*envs, envs[-1].model_copy(update={"event_time": at(95)})], until_s=1_000)
    assert storms == []  # 4 kills, below the node's 5


def test_a_kernel_oom_message_without_a_victim_is_kept_as_it_is() -> None:
    assert victim_of("n1", "System OOM encountered") == "n1: System OOM encountered"
    assert victim_of("n1", "") == "n1: unknown process"


def test_pods_held_at_their_gpu_memory_limit_count_as_oom_events_of_their_card() -> None:
    hami = node_of("hami-0", gpu_replicas=10, gpu_sharing=SharingMode.HAMI)
    pods = ["llm/a", "llm/b", "llm/c"]
    envs = [wrap(NodeEvent(change="upsert", node=hami), 0)]
    envs += [wrap(pod(k, "hami-0", limit=8_000), 1) for k in pods]
    use: dict[str, float] = {k: 4_000.0 for k in pods}
    for i, k in enumerate(pods):
        use[k] = 7_900.0  # 98.75 % of the limit, from 10, 20 and 30 s
        sample = GpuSample(
            node="hami-0",
            gpu_index=0,
            memory_total_mib=32_768.0,
            memory_used_mib=sum(use.values()),
            pod_memory_mib=dict(use),
        )
        envs.append(wrap(GpuSampleEvent(sample=sample), 10 + 10 * i))
    _, storms = run(envs, until_s=1_000)
    opened = [s for s in storms if s.state == "open"]
    assert [(s.scope.value, s.scope_id) for s in opened] == [("gpu", "hami-0/0")]
    # each held 60 s: at 70, 80 and 90 s; the third is the card's third in 60 s
    assert opened[0].opened_at == at(90)
    assert opened[0].evidence["victims"] == pods


def test_a_kernel_oom_on_a_node_not_known_is_counted_nowhere_and_leaves_no_state() -> None:
    p = define_pipeline(GpufragSettings()).build()
    feed(p, wrap(system_oom(1), 0))
    assert "cpu-gpu-0" not in p.join.node_states
    feed(p, wrap(NodeEvent(change="upsert", node=node_of("cpu-gpu-0")), 10))
    assert p.join.node_profiles["cpu-gpu-0"].system_oom_count == 0
