"""The Faust app: thin agents hosting the same operators as the embedded runner.

Three stages, each an agent over co-partitioned topics, with its state in Faust tables (in-memory,
backed by changelog topics, so a restarted worker recovers it):

- tasks (keyed by pod): pod events, scheduler events and GPU memory peaks -> ``task_step``;
  emits task deltas (to the cluster view) and bindings (to the pod's node);
- nodes (keyed by node): node events, GPU samples and bindings -> ``node_step``;
  emits node deltas (to the cluster view) and memory peaks (to the pod);
- cluster view (one partition, low rate): task and node deltas -> ``FragmentationAnalysis``;
  emits signals. Its inputs are kept in tables, and the analysis is rebuilt from them after a
  restart, with the signals that were open.

Each agent decodes raw bytes itself: a message that is not a valid event goes to the dead-letter
topic with the reason and its offset, and the agent goes on.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import faust

from models import (
    AnalysisSettings,
    Envelope,
    GpuSampleEvent,
    NodeEvent,
    PodEvent,
    SchedulingEvent,
    Signal,
    TaskProfile,
    from_json,
    to_json,
)
from streams.distributed import topics
from streams.distributed.codec import (
    DecodeError,
    dead_letter,
    decode,
    decode_node_state,
    describe_error,
    encode,
    encode_node_state,
)
from streams.fragmentation.analysis import FragmentationAnalysis
from streams.fragmentation.shapes import TypicalPods
from streams.profiles.join import (
    Binding,
    NodeProfileUpdate,
    NodeState,
    PeakReport,
    TaskProfileUpdate,
    node_step,
    task_step,
)

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
    prefix: str
    replication: int
    datadir: str
    analysis: AnalysisSettings
    typical: TypicalPods | None  # fixed expected workload (a trace's); None: learn it


def build_app(cfg: WorkerConfig) -> faust.App:
    app = faust.App(
        cfg.app_id,
        broker=";".join(f"gpufrag://{b}" for b in cfg.bootstrap.split(",")),
        store="memory://",
        datadir=cfg.datadir,
        topic_partitions=topics.PODS.partitions,
        topic_replication_factor=cfg.replication,
        topic_allow_declare=True,
        producer_acks=-1,
        consumer_auto_offset_reset="earliest",
        web_enabled=False,
        broker_commit_every=200,
        # a worker that dies is noticed in seconds, not the default minute, so its partitions
        # move to the others quickly
        broker_session_timeout=10.0,
        broker_heartbeat_interval=2.0,
        # everything is raw bytes, decoded by our models
        key_serializer="raw",
        value_serializer="raw",
    )

    def topic(*specs: topics.TopicSpec) -> Any:
        return app.topic(*(s.full_name(cfg.prefix) for s in specs), **RAW)

    raw_schema: Any = faust.Schema(**RAW)

    def table(name: str, partitions: int) -> Any:
        # key_type/value_type bytes: recovery decodes the changelog with serializers derived
        # from them (JSON otherwise, which fails on every record and never finishes)
        return app.Table(
            name,
            default=None,
            partitions=partitions,
            schema=raw_schema,
            key_type=bytes,
            value_type=bytes,
        )

    task_in = topic(topics.PODS, topics.SCHEDULER_EVENTS, topics.POD_PEAKS)
    node_in = topic(topics.NODES, topics.GPU_SAMPLES, topics.NODE_BINDINGS)
    cluster_in = topic(topics.CAPACITY_DELTAS)
    bindings_out = topic(topics.NODE_BINDINGS)
    peaks_out = topic(topics.POD_PEAKS)
    deltas_out = topic(topics.CAPACITY_DELTAS)
    signals_out = topic(topics.SIGNALS)
    dlq = topic(topics.DEAD_LETTER)
    peaks_name = topics.POD_PEAKS.full_name(cfg.prefix)
    bindings_name = topics.NODE_BINDINGS.full_name(cfg.prefix)

    tasks = table("tasks", topics.PODS.partitions)
    node_states = table("node-states", topics.NODES.partitions)
    c_nodes = table("cluster-nodes", 1)
    c_tasks = table("cluster-tasks", 1)
    c_open = table("cluster-open-signals", 1)
    c_meta = table("cluster-meta", 1)
    counters = {"dead_letters": 0, "signals": 0}
    app.gpufrag_counters = counters  # type: ignore[attr-defined]

    async def reject(event: Any, reason: str) -> None:
        msg = event.message
        counters["dead_letters"] += 1
        await dlq.send(
            key=msg.topic.encode(),
            value=dead_letter(
                reason=reason,
                topic=msg.topic,
                partition=msg.partition,
                offset=msg.offset,
                raw=event.value or b"",
            ),
        )

    @app.agent(task_in)
    async def task_agent(stream: Any) -> AsyncIterator[None]:
        async for event in stream.events():
            topic_name = event.message.topic
            try:
                item: PodEvent | SchedulingEvent | PeakReport
                if topic_name == peaks_name:
                    peak = decode(event.value)
                    if not isinstance(peak, PeakReport):
                        raise DecodeError(f"expected a peak report, got {type(peak).__name__}")
                    item, key, at = peak, peak.key, peak.at
                else:
                    env = from_json(Envelope, event.value)
                    payload = env.payload
                    if not isinstance(payload, PodEvent | SchedulingEvent):
                        raise DecodeError(f"a {env.kind.value} event on {topic_name}")
                    if isinstance(payload, SchedulingEvent) and not payload.event.pod_name:
                        continue  # node-scoped events say nothing about a task
                    item, key, at = payload, env.key, env.event_time
            except Exception as exc:  # not one of ours: dead letter, go on
                await reject(event, describe_error(exc))
                continue
            raw_prev = tasks.get(key.encode())
            prev = None if raw_prev is None else TaskProfile.model_validate_json(raw_prev)
            new, updates, binds = task_step(key, prev, item, at)
            if new is None:
                tasks.pop(key.encode(), None)
            else:
                tasks[key.encode()] = new.model_dump_json().encode()
            for u in updates:
                await deltas_out.send(key=key.encode(), value=encode(u))
            for b in binds:
                await bindings_out.send(key=b.node.encode(), value=encode(b))
            yield None

    @app.agent(node_in)
    async def node_agent(stream: Any) -> AsyncIterator[None]:
        async for event in stream.events():
            topic_name = event.message.topic
            try:
                item: NodeEvent | Any | Binding
                if topic_name == bindings_name:
                    b = decode(event.value)
                    if not isinstance(b, Binding):
                        raise DecodeError(f"expected a binding, got {type(b).__name__}")
                    item, name, at = b, b.node, b.at
                else:
                    env = from_json(Envelope, event.value)
                    p = env.payload
                    if isinstance(p, NodeEvent):
                        item, name = p, p.node.name
                    elif isinstance(p, GpuSampleEvent):
                        item, name = p.sample, p.sample.node
                    else:
                        raise DecodeError(f"a {env.kind.value} event on {topic_name}")
                    at = env.event_time
            except Exception as exc:
                await reject(event, describe_error(exc))
                continue
            raw_state = node_states.get(name.encode())
            st = NodeState() if raw_state is None else decode_node_state(raw_state)
            updates, peaks = node_step(name, st, item, at)
            if st.empty and st.profile is None:
                node_states.pop(name.encode(), None)
            else:
                node_states[name.encode()] = encode_node_state(st)
            for u in updates:
                await deltas_out.send(key=name.encode(), value=encode(u))
            for pk in peaks:
                await peaks_out.send(key=pk.key.encode(), value=encode(pk))
            yield None

    holder: dict[str, FragmentationAnalysis] = {}

    def analysis() -> FragmentationAnalysis:
        a = holder.get("a")
        if a is None:
            a = _rebuild(cfg, c_nodes, c_tasks, c_open, c_meta)
            holder["a"] = a
        return a

    @app.agent(cluster_in)
    async def cluster_agent(stream: Any) -> AsyncIterator[None]:
        async for event in stream.events():
            try:
                delta = decode(event.value)
                if not isinstance(delta, NodeProfileUpdate | TaskProfileUpdate):
                    raise DecodeError(f"expected a profile delta, got {type(delta).__name__}")
            except Exception as exc:
                await reject(event, describe_error(exc))
                continue
            a = analysis()
            if isinstance(delta, NodeProfileUpdate):
                k = delta.name.encode()
                if delta.profile is None:
                    c_nodes.pop(k, None)
                else:
                    c_nodes[k] = delta.profile.model_dump_json().encode()
            else:
                k = delta.key.encode()
                if delta.profile is None:
                    c_tasks.pop(k, None)
                else:
                    c_tasks[k] = delta.profile.model_dump_json().encode()
            out = a.apply(delta) + a.advance(delta.at)
            if a.now is not None:
                c_meta[b"now"] = a.now.isoformat().encode()
            for sig in out:
                fp = sig.fingerprint.encode()
                if sig.state == "open":
                    c_open[fp] = to_json(sig)
                else:
                    c_open.pop(fp, None)
                counters["signals"] += 1
                await signals_out.send(key=fp, value=to_json(sig))
            yield None

    return app


def _rebuild(
    cfg: WorkerConfig, c_nodes: Any, c_tasks: Any, c_open: Any, c_meta: Any
) -> FragmentationAnalysis:
    """The analysis as it was: its inputs replayed silently, its open signals restored."""
    from models import NodeProfile

    a = FragmentationAnalysis(settings=cfg.analysis, typical=cfg.typical)
    raw_now = c_meta.get(b"now")
    at = datetime.fromisoformat(raw_now.decode()) if raw_now else None
    if at is None:
        return a
    for name, raw in sorted(c_nodes.items()):
        profile = NodeProfile.model_validate_json(raw)
        a.apply(NodeProfileUpdate(name.decode(), profile, profile.updated_at))
    for key, raw in sorted(c_tasks.items()):
        a.apply(TaskProfileUpdate(key.decode(), TaskProfile.model_validate_json(raw), at))
    a.advance(at)
    a.open = {fp.decode(): from_json(Signal, raw) for fp, raw in c_open.items()}
    log.info(
        "cluster view rebuilt: %d nodes, %d tasks, %d open signals",
        len(c_nodes),
        len(c_tasks),
        len(a.open),
    )
    return a
