"""The what-if core on a hand-made recording: recorded runtimes kept from the what-if's own
binding, waiting pods retried when a departure frees room, owners giving up at the recorded
deletion, and queueing counted the same way on both sides."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from streams.fragmentation.shapes import PodShape
from streams.placement.recorded_whatif import RecordedPod, replay_recorded
from streams.placement.spec import NodeSpec, PodSpec

T0 = datetime(2026, 3, 1, tzinfo=UTC)


def _at(s: float) -> datetime:
    return T0 + timedelta(seconds=s)


def _pod(name: str, arrived: float, bound: float | None, deleted: float | None) -> RecordedPod:
    spec = PodSpec(name=name, shape=PodShape(1000, 1000, 1, ""), memory_mib=1024)
    return RecordedPod(
        spec,
        _at(arrived),
        None if bound is None else _at(bound),
        None if deleted is None else _at(deleted),
    )


def test_a_waiting_pod_runs_when_room_frees_and_a_pod_that_gave_up_never_does() -> None:
    node = [NodeSpec("n0", 32_000, 256_000, 1, "A100")]
    pods = [
        _pod("a", 0, 0, 100),  # ran 100 s
        _pod("b", 10, 100, 200),  # waited 90 s for a, then ran 100 s
        _pod("c", 20, None, 30),  # gave up after 10 s
    ]
    out = replay_recorded(node, pods, policy="best-fit", seed=1, end=_at(300))
    assert (out.failed_recorded, out.failed_whatif) == (1, 1)
    assert out.placed_only_whatif == [] and out.placed_only_recorded == []
    # b: 90 s on one GPU; c: 10 s; both sides alike
    assert round(out.queue_gpu_hours_whatif * 3600) == 100
    assert round(out.queue_gpu_hours_recorded * 3600) == 100
    assert out.alloc_pct == 0.0  # b left at 200 s, after its recorded 100 s


def test_with_more_room_the_pod_that_gave_up_runs_to_the_end_of_the_window() -> None:
    nodes = [NodeSpec(f"n{i}", 32_000, 256_000, 1, "A100") for i in range(3)]
    pods = [_pod("a", 0, 0, None), _pod("b", 10, 10, None), _pod("c", 20, None, 30)]
    out = replay_recorded(nodes, pods, policy="fgd", seed=1, end=_at(300))
    assert out.placed_only_whatif == ["c"]  # no recorded runtime: it stays
    assert (out.failed_recorded, out.failed_whatif) == (1, 0)
    assert out.alloc_pct == 100.0
