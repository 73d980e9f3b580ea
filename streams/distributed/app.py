"""The Faust app: wiring only. Three keyed stages (``stages.py``) hosted by one stage class
(``stage.KeyedStage``), each an agent over co-partitioned topics, with its state in Faust
tables (in-memory, backed by changelog topics, so a restarted worker recovers it).

Event-time order: every stage partition holds its input until all its sources have reported
progress past it, then processes it in the source's order and reports its own progress
downstream.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass
from typing import Any

import faust
from faust.types import TP
from faust.types.auth import CredentialsT

from models import EventKind
from streams.distributed import topics
from streams.distributed.codec import dead_letter
from streams.distributed.flow import KeepQueuesWhileFlowing
from streams.distributed.offsets import CommitLedger
from streams.distributed.ordering import Watermarks
from streams.distributed.stage import KeyedStage, Reject, StageCounters, StageLogic
from streams.distributed.stages import ClusterLogic, NodeLogic, Outlets, TaskLogic
from streams.distributed.transport import LEDGER, REWOUND_HOOK
from streams.pipeline import InstantOutput, PipelineDef

log = logging.getLogger(__name__)
RAW: dict[str, Any] = {
    "key_type": bytes,
    "value_type": bytes,
    "key_serializer": "raw",
    "value_serializer": "raw",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerConfig:
    app_id: str
    bootstrap: str
    credentials: CredentialsT | None
    """Faust's broker credentials (TLS, SASL; None: plaintext), made from the Kafka settings by
    ``connectors.kafka.security.faust_credentials``; Faust gives them to the worker's consumer
    and to its producer, which creates the topics too. Required, so no worker is built without
    deciding how it connects."""
    prefix: str
    replication: int
    datadir: str
    pipeline: PipelineDef
    max_source_lag_s: float = 600.0
    observe: Callable[[InstantOutput], None] | None = None
    """Told each instant the cluster stage evaluated (the worker's domain metrics)."""


@dataclass(frozen=True, slots=True)
class WorkerStats:
    """What a worker counts, for its metrics endpoint."""

    counters: dict[str, int]
    held: Callable[[], int]
    lag: Callable[[], dict[tuple[str, int], int]]
    """Per input partition held by this worker: messages past where the group would resume."""


def _faust_app(cfg: WorkerConfig) -> faust.App:
    return faust.App(
        cfg.app_id,
        broker=";".join(f"gpufrag://{b}" for b in cfg.bootstrap.split(",")),
        broker_credentials=cfg.credentials,
        store="memory://",
        datadir=cfg.datadir,
        topic_partitions=topics.PODS.partitions,
        topic_replication_factor=cfg.replication,
        topic_allow_declare=True,
        producer_acks=-1,
        consumer_auto_offset_reset="earliest",
        web_enabled=False,
        # commits are the ledger's (transport.py); each flushes the producer first, so one
        # every 2 s, not every few hundred messages
        broker_commit_every=1_000_000,
        broker_commit_interval=2.0,
        # held (not yet released) input stays unacknowledged by design: shutdown and rebalance
        # must not wait for it; the partition's next owner reads it again
        stream_wait_empty=False,
        # a worker that dies is noticed in seconds, not the default minute, so its partitions
        # move to the others quickly
        broker_session_timeout=10.0,
        broker_heartbeat_interval=2.0,
        # everything is raw bytes, decoded by our models
        key_serializer="raw",
        value_serializer="raw",
    )


def _marks(cfg: WorkerConfig, name: dict[str, str]) -> dict[str, Callable[[], Watermarks]]:
    """Each stage's sources: the outside ones learned from their reports, the upstream stage
    partitions always waited for."""
    lag = cfg.max_source_lag_s
    n_tasks, n_nodes = topics.PODS.partitions, topics.NODES.partitions
    deltas = name[topics.CAPACITY_DELTAS.name]
    pods_kinds = {
        EventKind.POD: name[topics.PODS.name],
        EventKind.SCHEDULER: name[topics.SCHEDULER_EVENTS.name],
    }
    nodes_kinds = {
        EventKind.NODE: name[topics.NODES.name],
        EventKind.GPU_SAMPLE: name[topics.GPU_SAMPLES.name],
        EventKind.SCHEDULER: name[topics.SCHEDULER_EVENTS.name],
    }
    bindings = {f"tasks/{q}": name[topics.NODE_BINDINGS.name] for q in range(n_tasks)}
    upstream = {
        **{f"tasks/{q}": deltas for q in range(n_tasks)},
        **{f"nodes/{n}": deltas for n in range(n_nodes)},
    }
    return {
        "tasks": lambda: Watermarks(topic_of_kind=dict(pods_kinds), max_source_lag_s=lag),
        "nodes": lambda: Watermarks(
            topic_of_kind=dict(nodes_kinds), fixed=dict(bindings), max_source_lag_s=lag
        ),
        "cluster": lambda: Watermarks(
            topic_of_kind={EventKind.QUEUE: name[topics.QUEUES.name]}, fixed=dict(upstream)
        ),
    }


READS: dict[str, tuple[topics.TopicSpec, ...]] = {
    "tasks": (topics.PODS, topics.SCHEDULER_EVENTS),
    "nodes": (topics.NODES, topics.GPU_SAMPLES, topics.SCHEDULER_EVENTS, topics.NODE_BINDINGS),
    # quota and queue objects go straight to the cluster view: low-rate, cluster-wide, and one
    # partition like the deltas, so Faust assigns both to the same worker
    "cluster": (topics.CAPACITY_DELTAS, topics.QUEUES),
}
"""Each stage's input topics (the scheduler events feed two), so the commit waits for both."""

LOG_EVERY_S = 60.0
"""One line per (topic, reason) a minute: a producer sending garbage at 1,000 messages a
second would otherwise write 1,000 log lines a second; the counter keeps the full count."""


def _rejecter(dlq: Any, counters: StageCounters) -> Reject:
    logged: dict[tuple[str, str], float] = {}

    async def reject(event: Any, reason: str) -> None:
        msg = event.message
        code = "late" if reason.startswith("late") else "undecodable"
        counters.add("dead_letters")
        counters.add(f"dead_letters/{msg.topic}/{code}")
        now = time.monotonic()
        if now - logged.get((msg.topic, code), -LOG_EVERY_S) >= LOG_EVERY_S:
            logged[(msg.topic, code)] = now
            log.warning(
                "%s/%s@%s dead-lettered (%s); more of the same are counted "
                "(gpufrag_worker_dead_letters_by_reason_total), logged once a minute",
                msg.topic,
                msg.partition,
                msg.offset,
                reason,
            )
        raw = event.value or b""
        value = dead_letter(
            reason=reason, topic=msg.topic, partition=msg.partition, offset=msg.offset, raw=raw
        )
        await dlq.send(key=msg.topic.encode(), value=value)

    return reject


def _forget_on_revoke_and_rewind(
    app: faust.App, stages: dict[str, KeyedStage], name: dict[str, str]
) -> None:
    """Revoked partitions' held input goes to their next owner, and partitions the consumer
    read again from their start (``transport.py``) are read afresh: each stage forgets what it
    held for them."""
    main_topic = {
        name[topics.PODS.name]: "tasks",
        name[topics.NODES.name]: "nodes",
        name[topics.CAPACITY_DELTAS.name]: "cluster",
        name[topics.QUEUES.name]: "cluster",
    }

    def forget(tps: Iterable[Any], why: str) -> None:
        by_stage: dict[str, set[int]] = {}
        for tp in tps:
            if (stage := main_topic.get(tp.topic)) is not None:
                by_stage.setdefault(stage, set()).add(tp.partition)
        for stage, partitions in by_stage.items():
            stages[stage].revoked(partitions)
        log.info("partitions %s: %s", why, {s: sorted(p) for s, p in by_stage.items()})

    async def on_revoked(sender: Any, *args: Any, signal: Any, **kwargs: Any) -> None:
        forget(args[0] if args else kwargs.get("revoked", ()), "revoked")

    revoked_signal: Any = app.on_partitions_revoked
    revoked_signal.connect(on_revoked)
    setattr(app, REWOUND_HOOK, lambda tps: forget(tps, "read again from their start"))


def build_app(cfg: WorkerConfig) -> tuple[faust.App, WorkerStats]:
    app = _faust_app(cfg)
    # before any agent's queue registers with Faust's own (see flow.py)
    assert "flow_control" not in app.__dict__
    app.flow_control = KeepQueuesWhileFlowing(loop=app.loop)
    name = {s.name: s.full_name(cfg.prefix) for s in topics.ALL}
    raw_schema: Any = faust.Schema(**RAW)

    def topic(*specs: topics.TopicSpec) -> Any:
        return app.topic(*(s.full_name(cfg.prefix) for s in specs), **RAW)

    def table(table_name: str) -> Any:
        # key_type/value_type bytes: recovery decodes the changelog with serializers derived
        # from them (JSON otherwise, which fails on every record and never finishes)
        return app.Table(
            table_name,
            default=None,
            partitions=topics.TABLES[table_name],
            schema=raw_schema,
            key_type=bytes,
            value_type=bytes,
        )

    counts = {"dead_letters": 0, "signals": 0, "redelivered": 0, "released": 0}
    counters = StageCounters(counts)
    reject = _rejecter(topic(topics.DEAD_LETTER), counters)
    out = Outlets(
        bindings=topic(topics.NODE_BINDINGS),
        deltas=topic(topics.CAPACITY_DELTAS),
        signals=topic(topics.SIGNALS),
        actions=topic(topics.ACTIONS),
        bindings_topic=name[topics.NODE_BINDINGS.name],
        queues_topic=name[topics.QUEUES.name],
        binding_partitions=topics.NODE_BINDINGS.partitions,
        reports=topic(topics.CLUSTER_REPORTS),
        flush=lambda: app.producer.flush(),
    )
    marks = _marks(cfg, name)
    ledger = _ledger(name)
    setattr(app, LEDGER, ledger)
    tables = {n: table(n) for n in ("tasks", "node-states", "cluster")}
    logics: tuple[StageLogic, ...] = (
        TaskLogic(cfg.pipeline, tables["tasks"], out),
        NodeLogic(cfg.pipeline, tables["node-states"], out),
        ClusterLogic(cfg.pipeline, tables["cluster"], out, counters, observe=cfg.observe),
    )
    stages = {
        logic.name: KeyedStage(
            logic,
            table=t,
            marks=marks[logic.name],
            reject=reject,
            counters=counters,
            ledger=ledger,
        )
        for logic, t in zip(logics, tables.values(), strict=True)
    }
    _forget_on_revoke_and_rewind(app, stages, name)

    @app.agent(topic(*READS["tasks"]))
    async def task_agent(stream: Any) -> AsyncIterator[None]:
        async for _ in stages["tasks"].run(stream):
            yield None

    @app.agent(topic(*READS["nodes"]))
    async def node_agent(stream: Any) -> AsyncIterator[None]:
        async for _ in stages["nodes"].run(stream):
            yield None

    @app.agent(topic(*READS["cluster"]))
    async def cluster_agent(stream: Any) -> AsyncIterator[None]:
        async for _ in stages["cluster"].run(stream):
            yield None

    held = lambda: sum(s.waiting for s in stages.values())  # noqa: E731
    return app, WorkerStats(counters=counts, held=held, lag=lambda: _lag(app, ledger))


def _ledger(name: dict[str, str]) -> CommitLedger:
    readers: dict[str, set[str]] = {}
    for stage, specs in READS.items():
        for spec in specs:
            readers.setdefault(name[spec.name], set()).add(stage)
    return CommitLedger(readers)


def _lag(app: faust.App, ledger: CommitLedger) -> dict[tuple[str, int], int]:
    """The highwater the consumer last fetched, less where the group would resume; a
    partition not fetched since its assignment is left out."""
    out: dict[tuple[str, int], int] = {}
    for (t, p), resume in sorted(ledger.commits().items()):
        try:
            high = app.consumer.highwater(TP(t, p))
        except Exception:  # revoked meanwhile, or no consumer yet
            continue
        if high is not None:
            out[(t, p)] = max(0, high - resume)
    return out
