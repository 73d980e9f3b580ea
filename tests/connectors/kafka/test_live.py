"""The live stage: events held for the allowed delay, sent in event-time order, progress every
step, late events counted and passed on; with a fake clock, and the late lane on a real
broker."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest
from aiokafka import AIOKafkaConsumer
from prometheus_client import CollectorRegistry

from connectors.kafka.outlet import PublisherOutlet
from connectors.kafka.publisher import EventPublisher
from connectors.live_stage import LiveMetrics, LiveStage
from models import Envelope, GpuSample, GpuSampleEvent, KafkaSettings, from_json
from models.progress import SourceProgress
from streams.app.lifecycle.bus import Bus
from streams.distributed import topics
from streams.runner.live_stream import LiveStream

T0 = datetime(2026, 3, 2, 9, 30, tzinfo=UTC)
DELAY_S = 2.0


class FakeClock:
    def __init__(self) -> None:
        self.at = T0

    def __call__(self) -> datetime:
        return self.at

    def set(self, seconds: float) -> None:
        self.at = T0 + timedelta(seconds=seconds)


@dataclass
class Recorder:
    """An outlet that writes down what it is asked to do, times as seconds after T0."""

    calls: list[tuple[str, object]] = field(default_factory=list)

    async def send(self, env: Envelope) -> None:
        self.calls.append(("send", _name(env)))

    async def send_late(self, env: Envelope) -> None:
        self.calls.append(("late", _name(env)))

    async def progress(self, upto: datetime) -> None:
        self.calls.append(("progress", (upto - T0).total_seconds()))


def sample(name: str, at_s: float) -> Envelope:
    """An event named by its node, at T0 + at_s."""
    return Envelope.wrap(
        GpuSampleEvent(sample=GpuSample(node=name, gpu_index=0)),
        event_time=T0 + timedelta(seconds=at_s),
        source="dcgm",
    )


def _name(env: Envelope) -> str:
    assert isinstance(env.payload, GpuSampleEvent)
    return env.payload.sample.node


def make_stage(
    outlet: Recorder | LiveStream | PublisherOutlet,
    clock: FakeClock,
    *,
    registry: CollectorRegistry | None = None,
    max_held: int = 100,
) -> tuple[LiveStage, CollectorRegistry]:
    reg = registry or CollectorRegistry()
    stage = LiveStage(
        name="dcgm@test",
        outlet=outlet,
        metrics=LiveMetrics(reg),
        allowed_delay_s=DELAY_S,
        max_held=max_held,
        now=clock,
    )
    return stage, reg


# Steps: ("emit", name, event time s), ("at", wall s), ("step",), ("close",). Every event
# comes from one source; the stage's delay is 2 s.
Step = tuple[object, ...]
SCENARIOS: dict[str, tuple[list[Step], list[tuple[str, object]], int]] = {
    "a quiet source still reports progress every step": (
        [("at", 1.0), ("step",), ("at", 2.5), ("step",)],
        [("progress", -1.0), ("progress", 0.5)],
        0,
    ),
    "events out of order go out sorted once older than the delay": (
        [
            ("emit", "a", 0.8),
            ("emit", "b", 0.3),
            ("emit", "c", 2.5),
            ("at", 3.0),
            ("step",),
            ("at", 5.0),
            ("step",),
        ],
        [("send", "b"), ("send", "a"), ("progress", 1.0), ("send", "c"), ("progress", 3.0)],
        0,
    ),
    "events of one instant keep their arrival order": (
        [("emit", "x", 0.5), ("emit", "y", 0.5), ("emit", "w", 0.5), ("at", 3.0), ("step",)],
        [("send", "x"), ("send", "y"), ("send", "w"), ("progress", 1.0)],
        0,
    ),
    "an event at the cutoff is released with it": (
        [("emit", "a", 1.0), ("at", 3.0), ("step",)],
        [("send", "a"), ("progress", 1.0)],
        0,
    ),
    "an event after its time was reported is passed on as late and counted": (
        [
            ("at", 3.0),
            ("step",),
            ("emit", "old", 0.5),
            ("emit", "edge", 1.0),
            ("emit", "fresh", 1.5),
            ("at", 4.0),
            ("step",),
        ],
        [
            ("progress", 1.0),
            ("late", "old"),
            ("late", "edge"),
            ("send", "fresh"),
            ("progress", 2.0),
        ],
        2,
    ),
    "a late event older than what was sent does not stop the in-order ones": (
        [
            ("emit", "a", 0.9),
            ("at", 3.0),
            ("step",),
            ("emit", "older", 0.2),
            ("emit", "b", 1.8),
            ("at", 4.0),
            ("step",),
        ],
        [
            ("send", "a"),
            ("progress", 1.0),
            ("late", "older"),
            ("send", "b"),
            ("progress", 2.0),
        ],
        1,
    ),
    "a wall clock stepped back never takes progress back": (
        [
            ("at", 3.0),
            ("step",),
            ("emit", "a", 1.2),
            ("at", 2.0),
            ("step",),
            ("at", 4.0),
            ("step",),
        ],
        [("progress", 1.0), ("send", "a"), ("progress", 2.0)],
        0,
    ),
    "closing sends everything held and reports up to now": (
        [("emit", "a", 2.9), ("emit", "b", 2.1), ("at", 3.0), ("close",)],
        [("send", "b"), ("send", "a"), ("progress", 3.0)],
        0,
    ),
    "closing reports up to an event from a clock ahead of ours": (
        [("emit", "ahead", 7.0), ("at", 3.0), ("step",), ("close",)],
        [("progress", 1.0), ("send", "ahead"), ("progress", 7.0)],
        0,
    ),
    "closing a quiet stage still reports progress": (
        [("at", 3.0), ("close",)],
        [("progress", 3.0)],
        0,
    ),
}


@pytest.mark.parametrize("name", list(SCENARIOS))
async def test_scenario(name: str) -> None:
    steps, expected, late = SCENARIOS[name]
    clock, outlet = FakeClock(), Recorder()
    stage, reg = make_stage(outlet, clock)
    emit = stage.emitter("dcgm@test")
    for step in steps:
        match step:
            case ("emit", str(node), float(at_s)):
                await emit(sample(node, at_s))
            case ("at", float(wall_s)):
                clock.set(wall_s)
            case ("step",):
                await stage.step()
            case ("close",):
                await stage.close()
            case _:
                raise AssertionError(f"bad step {step}")
    assert outlet.calls == expected
    emitted = sum(1 for s in steps if s[0] == "emit")
    assert reg.get_sample_value("gpufrag_watch_events_total", {"source": "dcgm@test"}) == emitted
    assert reg.get_sample_value("gpufrag_watch_late_events_total", {"source": "dcgm@test"}) == late
    assert stage.late == late


async def test_metrics_of_a_source_exist_before_its_first_event() -> None:
    clock = FakeClock()
    clock.set(10.0)
    stage, reg = make_stage(Recorder(), clock)
    stage.emitter("nvml@node-1")
    for metric in ("events", "late_events", "source_failures"):
        value = reg.get_sample_value(f"gpufrag_watch_{metric}_total", {"source": "nvml@node-1"})
        assert value == 0.0, metric
    await stage.emitter("nvml@node-1")(sample("n", 9.5))
    last = reg.get_sample_value(
        "gpufrag_watch_last_event_timestamp_seconds", {"source": "nvml@node-1"}
    )
    assert last == clock().timestamp()
    await stage.step()
    assert reg.get_sample_value("gpufrag_watch_held_events", {"stage": "dcgm@test"}) == 1
    progress = reg.get_sample_value(
        "gpufrag_watch_progress_timestamp_seconds", {"stage": "dcgm@test"}
    )
    assert progress == (T0 + timedelta(seconds=8)).timestamp()


async def test_late_events_are_logged_at_most_once_a_minute(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock, outlet = FakeClock(), Recorder()
    stage, _ = make_stage(outlet, clock)
    emit = stage.emitter("kube@test")
    clock.set(10.0)
    await stage.step()  # progress up to 8 s
    for wall_s, count in ((11.0, 3), (30.0, 2), (75.0, 1)):
        clock.set(wall_s)
        for _ in range(count):
            await emit(sample("late", 1.0))
        await stage.step()
    warnings = [r.getMessage() for r in caplog.records if "late events" in r.getMessage()]
    assert len(warnings) == 2, warnings  # at 11 s, then not before 71 s
    assert warnings[0].startswith("dcgm@test: 3 late events")
    assert warnings[1].startswith("dcgm@test: 3 late events")  # the 2 at 30 s and the 1 at 75 s
    assert "progress already reported up to" in warnings[0]
    assert [c for c in outlet.calls if c[0] == "late"] == [("late", "late")] * 6


async def test_a_full_stage_makes_its_source_wait_until_a_step_frees_room() -> None:
    clock = FakeClock()
    stage, _ = make_stage(Recorder(), clock, max_held=2)
    emit = stage.emitter("dcgm@test")
    await emit(sample("a", 0.1))
    await emit(sample("b", 0.2))
    third = asyncio.ensure_future(emit(sample("c", 0.3)))
    await asyncio.sleep(0.01)
    assert not third.done()  # waits: two are held
    clock.set(3.0)
    await stage.step()
    await asyncio.wait_for(third, 1.0)
    assert len(stage.reorder) == 1


async def test_emit_after_close_is_refused_and_a_waiting_source_is_released() -> None:
    clock = FakeClock()
    stage, _ = make_stage(Recorder(), clock, max_held=1)
    emit = stage.emitter("dcgm@test")
    await emit(sample("a", 5.0))
    waiting = asyncio.ensure_future(emit(sample("b", 5.1)))
    await asyncio.sleep(0.01)
    await stage.close()
    with pytest.raises(RuntimeError, match="closed"):
        await asyncio.wait_for(waiting, 1.0)
    with pytest.raises(RuntimeError, match="closed"):
        await emit(sample("c", 6.0))


async def test_run_steps_until_told_then_closes() -> None:
    """``run`` on the real loop: with a 10 ms interval it steps repeatedly while waiting, and
    closes (sending what is held) once the sources are done."""
    clock, outlet = FakeClock(), Recorder()
    stage = LiveStage(
        name="s",
        outlet=outlet,
        metrics=LiveMetrics(CollectorRegistry()),
        allowed_delay_s=DELAY_S,
        interval_s=0.01,
        now=clock,
    )
    done = asyncio.Event()
    task = asyncio.create_task(stage.run(until=done))
    await stage.emitter("s")(sample("held", 50.0))
    for wall_s in (3.0, 4.0, 5.0):
        clock.set(wall_s)
        await asyncio.sleep(0.05)
    done.set()
    await asyncio.wait_for(task, 1.0)
    assert ("progress", 3.0) in outlet.calls  # stepped while running
    assert outlet.calls[-2:] == [("send", "held"), ("progress", 50.0)]


async def test_live_stream_hands_out_what_was_sent_then_ends() -> None:
    stream = LiveStream(maxsize=2)
    await stream.send(sample("a", 1.0))
    await stream.send_late(sample("b", 0.5))
    stream.end()  # the queue is full: ending must not wait
    got = [_name(env) async for env in stream]
    assert got == ["a", "b"]
    with pytest.raises(StopAsyncIteration):
        await stream.__anext__()


async def test_live_stream_wakes_a_waiting_reader_at_the_end() -> None:
    stream = LiveStream()
    reader = asyncio.create_task(stream.__anext__())
    await asyncio.sleep(0.01)
    stream.end()
    with pytest.raises(StopAsyncIteration):
        await asyncio.wait_for(reader, 1.0)


async def _consume(bootstrap: str, topic: str, until: Callable[[list[bytes]], bool]) -> list[bytes]:
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False
    )
    await consumer.start()
    got: list[bytes] = []
    try:
        async with asyncio.timeout(30):
            while not until(got):
                batch = await consumer.getmany(timeout_ms=500)
                for records in batch.values():
                    got += [r.value or b"" for r in records]
    finally:
        await consumer.stop()
    return got


@pytest.mark.kafka
async def test_late_event_older_than_the_last_sent_reaches_the_topic(
    kafka_bootstrap: str, topic_prefix: str
) -> None:
    """The publisher refuses an event older than its last one (its progress reports promise
    order); the late lane still puts it on the topic, where the workers judge it."""
    kafka = KafkaSettings(bootstrap=kafka_bootstrap)
    bus = Bus(kafka, topic_prefix)
    await bus.ensure_topics()
    topic = topics.GPU_SAMPLES.full_name(topic_prefix)
    publisher = EventPublisher(kafka, topic_of={"gpu_sample": topic}, source="dcgm@t")
    outlet = PublisherOutlet(publisher)
    clock = FakeClock()
    stage, _ = make_stage(outlet, clock)
    emit = stage.emitter("dcgm@t")
    await outlet.start()
    try:
        await emit(sample("first", 0.9))
        clock.set(3.0)
        await stage.step()
        await emit(sample("older", 0.2))
        with pytest.raises(ValueError, match="event-time order"):
            await publisher.publish(sample("older", 0.2))
        clock.set(4.0)
        await stage.step()
        await stage.close()
    finally:
        await outlet.stop()
    assert outlet.late_sent == 1
    partitions = topics.GPU_SAMPLES.partitions

    def complete(got: list[bytes]) -> bool:
        return (
            sum(1 for v in got if not v.startswith(b'{"kind"')) == 2
            and sum(1 for v in got if v.startswith(b'{"kind"')) >= 3 * partitions
        )

    got = await _consume(kafka_bootstrap, topic, complete)
    events = [from_json(Envelope, v) for v in got if not v.startswith(b'{"kind"')]
    assert sorted(_name(e) for e in events) == ["first", "older"]
    reports = [SourceProgress.model_validate_json(v) for v in got if v.startswith(b'{"kind"')]
    assert {r.source for r in reports} == {"dcgm@t"}
    assert {(r.upto - T0).total_seconds() for r in reports} == {1.0, 2.0, 4.0}
