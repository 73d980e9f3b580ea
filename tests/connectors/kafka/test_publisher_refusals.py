"""What the publisher does with records the broker refuses (``connectors/kafka/publisher.py``).

The chaos soak's case: after a broker restart under load, three partitions' batches were
refused for good (the idempotent producer's sequence no longer matched), the publisher never
looked at the deliveries, exited 0, and the workers waited for events that never came. A
refusal cannot be produced on demand from a real broker, so the producer here is a stand-in
that keeps aiokafka's contract: ``send`` returns the delivery future, ``flush`` waits until
every future is done, a refused record's future holds the broker's error; a broker that takes
nothing makes ``send`` raise ``KafkaTimeoutError`` (aiokafka's buffer full for its request
timeout) and adds nothing."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest
from aiokafka.errors import KafkaTimeoutError, OutOfOrderSequenceNumber

import connectors.kafka.publisher as publisher_module
from connectors.kafka.publisher import RESEND_ROUNDS, EventPublisher, PublishError
from models import Envelope, KafkaSettings, Node, NodeEvent

T0 = datetime(2023, 7, 1, tzinfo=UTC)


@dataclass
class _Broker:
    """What reached the partitions, and how many more batches each producer has refused."""

    logs: dict[tuple[str, int | None], list[bytes]] = field(default_factory=dict)
    refuse_first: int = 0
    """Producers (in order of creation) whose sends to partition 1 are all refused."""
    producers: int = 0
    timeouts: int = 0
    """Sends still to time out (the broker down), whichever producer makes them."""
    wedged_first: int = 0
    """Producers (in order of creation) whose every send times out while the broker takes
    the others' (the long chaos soak's producer after a broker restart)."""


class _Metadata:
    """aiokafka's cluster metadata as the publisher's warning reads it: two partitions a
    topic, each led by broker 1."""

    def partitions_for_topic(self, topic: str) -> set[int]:
        return {0, 1}

    def leader_for_partition(self, tp: object) -> int:
        return 1


@dataclass
class _Client:
    cluster: _Metadata = field(default_factory=_Metadata)


@dataclass
class _Producer:
    broker: _Broker
    refusing: bool
    wedged: bool = False
    client: _Client = field(default_factory=_Client)
    pending: list[tuple[asyncio.Future[object], tuple[str, int | None], bytes]] = field(
        default_factory=list
    )

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def partitions_for(self, topic: str) -> set[int]:
        return {0, 1}

    async def send(
        self, topic: str, *, key: bytes, value: bytes, partition: int | None = None
    ) -> asyncio.Future[object]:
        if self.wedged:
            raise KafkaTimeoutError()
        if self.broker.timeouts > 0:
            self.broker.timeouts -= 1
            raise KafkaTimeoutError()
        where = (topic, partition if partition is not None else int(key[-1:] == b"1"))
        delivery: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        self.pending.append((delivery, where, value))
        return delivery

    async def flush(self) -> None:
        for delivery, where, value in self.pending:
            if self.refusing and where[1] == 1:
                delivery.set_exception(OutOfOrderSequenceNumber())
            else:
                self.broker.logs.setdefault(where, []).append(value)
                delivery.set_result(None)
        self.pending = []


def _publisher(
    broker: _Broker, monkeypatch: pytest.MonkeyPatch, *, outage_wait_s: float = 600
) -> EventPublisher:
    def producer(*args: object, **kwargs: object) -> _Producer:
        broker.producers += 1
        return _Producer(
            broker,
            refusing=broker.producers <= broker.refuse_first,
            wedged=broker.producers <= broker.wedged_first,
        )

    monkeypatch.setattr(publisher_module, "acked_producer", producer)
    return EventPublisher(
        KafkaSettings(), topic_of={"node": "nodes"}, progress_every=2, outage_wait_s=outage_wait_s
    )


def _events(n: int) -> list[Envelope]:
    """Nodes named so that their keys alternate between the stand-in's two partitions."""
    return [
        Envelope.wrap(
            NodeEvent(change="upsert", node=Node(name=f"n{i}-{i % 2}", cpu_milli=1, memory_mib=1)),
            event_time=T0 + timedelta(seconds=i),
            source="test",
        )
        for i in range(n)
    ]


async def _run(pub: EventPublisher, envs: list[Envelope]) -> None:
    await pub.start()
    try:
        for env in envs:
            await pub.publish(env)
        await pub.report_progress()
    finally:
        await pub.stop()


@pytest.mark.parametrize(
    ("broker", "producers"),
    [
        # the soak's case: one producer's batches to partition 1 refused for good
        (_Broker(refuse_first=1), 2),
        # a broker down for two sends' timeouts: a new producer after each
        (_Broker(timeouts=2), 3),
        # the long soak's case: a producer that takes nothing while the broker takes others'
        (_Broker(wedged_first=1), 2),
    ],
    ids=["refused", "down-a-while", "wedged-producer"],
)
async def test_every_event_reaches_its_partition_in_order(
    broker: _Broker,
    producers: int,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    pub = _publisher(broker, monkeypatch)
    envs = _events(6)
    with caplog.at_level("WARNING", logger="connectors.kafka.publisher"):
        await _run(pub, envs)
    # each replacement says where the metadata puts the input partitions' leaders
    replaced = [r.getMessage() for r in caplog.records if "starting a new one" in r.getMessage()]
    assert len(replaced) == producers - 1
    assert all("2 input partitions with a leader, 0 without" in m for m in replaced), replaced
    for p in (0, 1):
        sent = [e.id.encode() for e in envs if e.key.endswith(str(p))]
        on_p = [v for v in broker.logs[("nodes", p)] if b'"kind":"progress"' not in v]
        assert [next(i for i in sent if i in v) for v in on_p] == sent  # all, in order, once
    assert (broker.producers, broker.timeouts) == (producers, 0)
    assert pub.resent > 0 or broker.refuse_first == 0


async def test_a_broker_that_keeps_refusing_fails_the_publisher_loudly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    broker = _Broker(refuse_first=RESEND_ROUNDS + 1)
    pub = _publisher(broker, monkeypatch)
    with pytest.raises(PublishError, match=r"did not take the records 6 times .* 1 refused"):
        await _run(pub, _events(4))


async def test_a_broker_that_takes_nothing_past_the_bound_fails_the_publisher_loudly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    broker = _Broker(timeouts=1)
    pub = _publisher(broker, monkeypatch, outage_wait_s=0)
    with pytest.raises(PublishError, match=r"took nothing for 0 s \(a send to nodes"):
        await _run(pub, _events(4))
