"""A keyed stage's table entries carry the release mark they were written at
(``streams/distributed/key_state.py``). The chaos soak's case: a worker killed after a release's
states reached the changelog and before its mark did; the successor restored the older mark,
read the release's items again and applied a pod's creation onto a state that already held its
binding, sending a profile row at the creation's instant with the binding's time in it."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import orjson

from models import Envelope, GpufragSettings, Node, NodeEvent, PodEvent
from models.analysis import InstantReport
from streams.distributed.codec import decode_report
from streams.distributed.key_state import tagged, untagged
from streams.distributed.stage import StageCounters, released_key
from streams.distributed.stages import ClusterLogic, NodeLogic, Outlets, TaskLogic, ordered
from streams.instants import OrderKey
from streams.pipeline import define_pipeline
from streams.profiles.join import TaskProfileUpdate
from streams.profiles.operators import NodeInput, TaskInput
from tests.streams.planner_scenarios import CPU, MEM, T0, PodSpec, pod_event


@dataclass
class _Topic:
    sent: list[tuple[bytes, dict[str, Any]]] = field(default_factory=list)

    async def send(self, *, key: bytes, value: bytes, partition: int | None = None) -> None:
        self.sent.append((key, orjson.loads(value)))


def _outlets() -> tuple[Outlets, _Topic]:
    deltas = _Topic()
    out = Outlets(
        bindings=_Topic(),
        deltas=deltas,
        signals=_Topic(),
        actions=_Topic(),
        bindings_topic="bindings",
        queues_topic="queues",
        binding_partitions=1,
    )
    return out, deltas


def _task_item(spec: PodSpec, after_s: float) -> tuple[Any, TaskInput]:
    env = pod_event(spec, T0 + timedelta(seconds=after_s))
    assert env.key is not None and isinstance(env.payload, PodEvent)
    return ordered(env), TaskInput(env.key, env.payload, env.event_time, env.id)


def _task_items() -> list[tuple[Any, TaskInput]]:
    """A pod created pending, then bound a second later."""
    bound = PodSpec(name="p", gpu_milli=500, node="a", cards=(0,))
    return [_task_item(PodSpec(name="p", gpu_milli=500), 0), _task_item(bound, 1)]


async def test_the_successor_of_a_killed_worker_skips_what_a_keys_state_holds() -> None:
    table: dict[bytes, bytes] = {}
    pipeline = define_pipeline(GpufragSettings())
    first, first_sent = _outlets()
    logic = TaskLogic(pipeline, table, first)
    items = _task_items()
    for order, item in items:
        await logic.apply(order, item)
    await logic.settle(0, items[-1][0].at)  # the states are written; killed before the mark
    assert untagged(table[b"ml/p"])[0] == items[-1][0].at
    assert released_key(0) not in table

    successor_out, successor_sent = _outlets()
    successor = TaskLogic(pipeline, table, successor_out)
    for order, item in items:  # read again from the commit, with no mark restored
        await successor.apply(order, item)
    assert successor_sent.sent == []  # nothing applied twice: no second profile row
    await successor.apply(*_task_item(PodSpec(name="p", gpu_milli=500, node="b"), 9))
    assert [k for k, _ in successor_sent.sent] == [b"ml/p"]  # what comes after it, applied
    assert len(first_sent.sent) == 2


async def test_a_node_state_written_before_the_tag_existed_reads_as_before() -> None:
    """An entry without the tag (an older worker's) is restored and holds nothing back."""
    pipeline = define_pipeline(GpufragSettings())
    node = Node(name="a", cpu_milli=CPU, memory_mib=MEM, gpu_model="A100", gpu_count=2)
    event = NodeEvent(change="upsert", node=node)
    env = Envelope.wrap(event, event_time=T0, source="test")
    out, _ = _outlets()
    writer = NodeLogic(pipeline, {}, out)
    await writer.apply(ordered(env), NodeInput("a", event, T0))
    await writer.settle(0, T0)
    mark, state = untagged(writer.table[b"a"])
    assert mark == T0 and tagged(T0, state) == writer.table[b"a"]

    reader = NodeLogic(pipeline, {b"a": state}, out)  # as a worker before the tag wrote it
    assert not reader.keys.holds(reader.op, "a", ordered(env))
    assert reader.op.node_states["a"].node is not None


@dataclass
class _Reports:
    sent: list[InstantReport] = field(default_factory=list)

    async def send(self, *, key: bytes, value: bytes, partition: int | None = None) -> None:
        self.sent.append(decode_report(value))


def _cluster(pipeline: Any, table: dict[bytes, bytes]) -> tuple[ClusterLogic, _Reports]:
    out, _ = _outlets()
    reports = _Reports()
    out = dataclasses.replace(out, reports=reports)
    return ClusterLogic(pipeline, table, out, StageCounters({})), reports


def _cluster_items(pipeline: Any) -> list[tuple[OrderKey, Any]]:
    """The profile deltas of a node, a pod p created and deleted a second later, and a pod q
    created a second after that: what the tasks and nodes stages send the cluster view."""
    node = Node(name="a", cpu_milli=CPU, memory_mib=MEM, gpu_model="A100", gpu_count=2)
    event = NodeEvent(change="upsert", node=node)
    env = Envelope.wrap(event, event_time=T0, source="test")
    nodes, tasks = pipeline.node_join(), pipeline.task_join()
    out = [(ordered(env), d) for d in nodes.apply(NodeInput("a", event, T0))]
    p, q = PodSpec(name="p", gpu_milli=500), PodSpec(name="q", gpu_milli=500)
    for spec, after_s, deleted in ((p, 1, False), (p, 2, True), (q, 3, False)):
        env = pod_event(spec, T0 + timedelta(seconds=after_s))
        assert isinstance(env.payload, PodEvent)
        if deleted:
            gone = PodEvent(change="delete", pod=env.payload.pod)
            env = Envelope.wrap(gone, event_time=env.event_time, source="test")
        assert env.key is not None and isinstance(env.payload, PodEvent)
        got = tasks.apply(TaskInput(env.key, env.payload, env.event_time, env.id))
        out += [(ordered(env), d) for d in got if isinstance(d, TaskProfileUpdate)]
    return out


async def test_the_successor_skips_what_the_cluster_views_state_holds() -> None:
    """Killed after the release at 00:00:02 wrote the view (p created and deleted in it) and
    before the stage's mark: the successor restores the mark at 00:00:00 and reads p's
    deltas again. Applied again, p counted twice in the arrived demand."""
    pipeline = define_pipeline(GpufragSettings())
    items = _cluster_items(pipeline)
    table: dict[bytes, bytes] = {}
    first, first_reports = _cluster(pipeline, table)
    await first.apply(*items[0])
    await first.settle(0, T0)
    table[released_key(0)] = T0.isoformat().encode()  # the stage's mark, written
    for order, item in items[1:-1]:
        await first.apply(order, item)
    upto = items[-2][0].at
    await first.settle(0, upto)  # the view's state is written; killed before the mark

    successor, reports = _cluster(pipeline, table)
    for order, item in items[1:]:  # read again after the mark, and q after them
        await successor.apply(order, item)
    await successor.settle(0, items[-1][0].at)
    arrived = [r.summary.arrived_gpus for r in first_reports.sent + reports.sent]
    assert arrived == [0.0, 0.5, 0.5, 1.0]  # p once, then q: one report per instant
    assert successor.counters.counts == {"redelivered": len(items) - 2}
