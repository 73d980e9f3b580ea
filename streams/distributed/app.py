"""The Faust app: thin agents hosting the same operators as the embedded runner.

Three stages, each an agent over co-partitioned topics, with its state in Faust tables (in-memory,
backed by changelog topics, so a restarted worker recovers it):

- tasks (keyed by pod): pod events, scheduler events and GPU memory peaks -> ``task_step``;
  emits task deltas (to the cluster view) and bindings (to the pod's node);
- nodes (keyed by node): node events, GPU samples and bindings -> ``node_step``;
  emits node deltas (to the cluster view) and memory peaks (to the pod);
- cluster view (one partition, low rate): task and node deltas -> ``InstantAnalysis``;
  emits signals. Its inputs are kept in a table, and the analysis is rebuilt from it after a
  restart, with the signals that were open and its schedule of deferred work.

Event-time order: every stage partition holds its input (``ordering.Reorder``) until all its
sources have reported progress past it, then processes it in the source's order and reports its
own progress downstream. Held messages are not acknowledged, so Kafka redelivers them to
whichever worker owns the partition next; what was already released is recorded in the stage's
table (after the state it produced, in the same changelog partition), so redelivered copies are
recognised and dropped. GPU memory peaks are telemetry: applied as they come, never held.

Each agent decodes raw bytes itself: a message that is not a valid event goes to the dead-letter
topic with the reason and its offset, and the agent goes on.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import faust
import orjson

from models import (
    AnalysisSettings,
    EventKind,
    GpuSample,
    GpuSampleEvent,
    NodeEvent,
    NodeProfile,
    PodEvent,
    SchedulingEvent,
    Signal,
    TaskProfile,
    from_json,
    to_json,
)
from models.progress import SourceProgress
from streams.distributed import topics
from streams.distributed.codec import (
    DecodeError,
    dead_letter,
    decode,
    decode_input,
    decode_node_state,
    describe_error,
    encode,
    encode_node_state,
    encode_progress,
)
from streams.distributed.ordering import Reorder, Watermarks
from streams.fragmentation.analysis import FragmentationAnalysis
from streams.fragmentation.instants import InstantAnalysis, OrderKey
from streams.fragmentation.shapes import TypicalPods
from streams.profiles.join import (
    Binding,
    NodeProfileUpdate,
    NodeState,
    PeakReport,
    ProfileUpdate,
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
    max_source_lag_s: float = 600.0


@dataclass(frozen=True, slots=True)
class WorkerStats:
    """What a worker counts, for its metrics endpoint."""

    counters: dict[str, int]
    held: Callable[[], int]


def build_app(cfg: WorkerConfig) -> tuple[faust.App, WorkerStats]:
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
    name = {s.name: s.full_name(cfg.prefix) for s in topics.ALL}
    n_tasks, n_nodes = topics.PODS.partitions, topics.NODES.partitions

    tasks = table("tasks", topics.TABLES["tasks"])
    node_states = table("node-states", topics.TABLES["node-states"])
    cluster = table("cluster", topics.TABLES["cluster"])
    counters = {"dead_letters": 0, "signals": 0, "redelivered": 0, "released": 0}

    def marks(stage: str) -> Watermarks:
        if stage == "tasks":
            return Watermarks(
                topic_of_kind={
                    EventKind.POD: name[topics.PODS.name],
                    EventKind.SCHEDULER: name[topics.SCHEDULER_EVENTS.name],
                },
                max_source_lag_s=cfg.max_source_lag_s,
            )
        if stage == "nodes":
            return Watermarks(
                topic_of_kind={
                    EventKind.NODE: name[topics.NODES.name],
                    EventKind.GPU_SAMPLE: name[topics.GPU_SAMPLES.name],
                },
                fixed={f"tasks/{q}": name[topics.NODE_BINDINGS.name] for q in range(n_tasks)},
                max_source_lag_s=cfg.max_source_lag_s,
            )
        deltas = name[topics.CAPACITY_DELTAS.name]
        return Watermarks(
            topic_of_kind={},
            fixed={
                **{f"tasks/{q}": deltas for q in range(n_tasks)},
                **{f"nodes/{n}": deltas for n in range(n_nodes)},
            },
        )

    buffers: dict[tuple[str, int], Reorder[Any]] = {}
    held: dict[tuple[str, int], dict[tuple[str, str], Any]] = {}

    def released_key(p: int) -> bytes:
        # "~" appears in no pod key, node name or cluster key
        return f"~released/{p}".encode()

    def sources_key(p: int) -> bytes:
        return f"~sources/{p}".encode()

    def buffer(stage: str, p: int, state: Any) -> Reorder[Any]:
        buf = buffers.get((stage, p))
        if buf is None:
            buf = Reorder(marks(stage))
            raw = state.get(released_key(p))
            if raw is not None:
                buf.released = buf.restored = datetime.fromisoformat(raw.decode())
            known = state.get(sources_key(p))
            if known is not None:
                buf.watermarks.expect(known)
            buffers[(stage, p)] = buf
        return buf

    async def progressed(
        stream: Any,
        stage: str,
        p: int,
        state: Any,
        event: Any,
        progress: SourceProgress,
    ) -> tuple[Reorder[Any], datetime | None, list[tuple[OrderKey, Any]]]:
        """Take a source's report; returns the buffer, its new watermark and what it releases."""
        buf = buffer(stage, p, state)
        before = buf.watermarks.known()
        buf.watermarks.on_progress(event.message.topic, progress)
        after = buf.watermarks.known()
        if after != before:  # a new source: waited for after a restart too
            state[sources_key(p)] = after
        await hold_progress(stream, stage, p, event.message.topic, event, progress)
        wm, ready = buf.ready()
        return buf, wm, ready

    async def release(
        stream: Any,
        stage: str,
        p: int,
        buf: Reorder[Any],
        ready: list[tuple[OrderKey, Any]],
        apply: Callable[[OrderKey, Any], Awaitable[None]],
    ) -> bool:
        """Apply released items in order, acknowledging each; False when the partition was
        revoked meanwhile (its next owner redoes the rest, so no mark may be written)."""
        for order, (ev, item) in ready:
            if buffers.get((stage, p)) is not buf:
                return False
            await apply(order, item)
            await stream.ack(ev)
        counters["released"] += len(ready)
        return True

    async def on_revoked(sender: Any, *args: Any, signal: Any, **kwargs: Any) -> None:
        revoked = args[0] if args else kwargs.get("revoked", ())
        # held input was not acknowledged: its next owner reads it again
        stages = {
            name[topics.PODS.name]: "tasks",
            name[topics.NODES.name]: "nodes",
            name[topics.CAPACITY_DELTAS.name]: "cluster",
        }
        for tp in revoked:
            stage = stages.get(tp.topic)
            if stage is None:
                continue
            buffers.pop((stage, tp.partition), None)
            held.pop((stage, tp.partition), None)
            if stage == "cluster":
                holder.clear()
        log.info("partitions revoked: %d buffers kept", len(buffers))

    signal: Any = app.on_partitions_revoked
    signal.connect(on_revoked)

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

    async def drop_late(stream: Any, event: Any, why: str, buf: Reorder[Any]) -> None:
        if why == "redelivered":
            counters["redelivered"] += 1
        else:  # never silently: the source promised this would not come
            assert buf.released is not None
            await reject(
                event,
                f"late: event time at or before {buf.released.isoformat()}, which its source "
                "had already reported complete",
            )
        await stream.ack(event)

    async def hold_progress(
        stream: Any, stage: str, p: int, topic_name: str, event: Any, progress: SourceProgress
    ) -> None:
        """Keep a channel's latest report unacknowledged: after a crash it is read again, after
        the items it covers, so the restarted stage can release them."""
        channel = (progress.source, topic_name)
        per = held.setdefault((stage, p), {})
        prev = per.get(channel)
        per[channel] = event
        if prev is not None:
            await stream.ack(prev)

    async def report(stage: str, p: int, upto: datetime) -> None:
        progress = encode_progress(SourceProgress(source=f"{stage}/{p}", upto=upto, kinds=()))
        if stage == "tasks":
            for n in range(topics.NODE_BINDINGS.partitions):
                await bindings_out.send(key=b"", value=progress, partition=n)
        await deltas_out.send(key=b"", value=progress, partition=0)

    # --- tasks -----------------------------------------------------------------------------

    async def task_apply(
        item: PodEvent | SchedulingEvent | PeakReport,
        key: str,
        at: datetime,
        order: OrderKey | None,
    ) -> None:
        raw_prev = tasks.get(key.encode())
        prev = None if raw_prev is None else TaskProfile.model_validate_json(raw_prev)
        new, updates, binds = task_step(
            key, prev, item, at, event_id=None if order is None else order.id
        )
        if new is None:
            tasks.pop(key.encode(), None)
        else:
            tasks[key.encode()] = new.model_dump_json().encode()
        for sub, u in enumerate(updates):
            o = None if order is None else order._replace(rank=0, sub=sub)
            await deltas_out.send(key=key.encode(), value=encode(u, order=o))
        for sub, b in enumerate(binds):
            o = None if order is None else order._replace(rank=0, sub=sub)
            await bindings_out.send(key=b.node.encode(), value=encode(b, order=o))

    async def task_event(order: OrderKey, env: Any) -> None:
        pl = env.payload
        if not (isinstance(pl, SchedulingEvent) and not pl.event.pod_name):
            await task_apply(pl, env.key, env.event_time, order)

    @app.agent(task_in)
    async def task_agent(stream: Any) -> AsyncIterator[None]:
        s = stream.noack()
        async for event in s.events():
            msg = event.message
            p = msg.partition
            try:
                if msg.topic == name[topics.POD_PEAKS.name]:
                    decoded = decode(event.value)
                    if isinstance(decoded, SourceProgress):
                        await s.ack(event)  # peaks are telemetry: not waited for
                        continue
                    peak, _ = decoded
                    if not isinstance(peak, PeakReport):
                        raise DecodeError(f"expected a peak report, got {type(peak).__name__}")
                    await task_apply(peak, peak.key, peak.at, None)
                    await s.ack(event)
                    continue
                item = decode_input(event.value)
                if not isinstance(item, SourceProgress):
                    payload = item.payload
                    if not isinstance(payload, PodEvent | SchedulingEvent):
                        raise DecodeError(f"a {item.kind.value} event on {msg.topic}")
            except Exception as exc:  # not one of ours: dead letter, go on
                await reject(event, describe_error(exc))
                await s.ack(event)
                continue
            if isinstance(item, SourceProgress):
                buf, wm, ready = await progressed(s, "tasks", p, tasks, event, item)
                if wm is not None and await release(s, "tasks", p, buf, ready, task_event):
                    tasks[released_key(p)] = wm.isoformat().encode()
                    await report("tasks", p, wm)
                continue
            buf = buffer("tasks", p, tasks)
            if (why := buf.lateness(item.event_time)) is not None:
                await drop_late(s, event, why, buf)
            else:
                buf.add(
                    OrderKey(item.event_time, item.source, item.seq or 0, item.id), (event, item)
                )
            yield None

    # --- nodes -----------------------------------------------------------------------------

    async def node_apply(
        node: str, item: NodeEvent | GpuSample | Binding, at: datetime, order: OrderKey
    ) -> None:
        raw_state = node_states.get(node.encode())
        st = NodeState() if raw_state is None else decode_node_state(raw_state)
        updates, peaks = node_step(node, st, item, at)
        if st.empty and st.profile is None:
            node_states.pop(node.encode(), None)
        else:
            node_states[node.encode()] = encode_node_state(st)
        for sub, u in enumerate(updates):
            o = order._replace(rank=1, sub=order.sub if isinstance(item, Binding) else sub)
            await deltas_out.send(key=node.encode(), value=encode(u, order=o))
        for pk in peaks:
            await peaks_out.send(key=pk.key.encode(), value=encode(pk, order=None))

    async def node_entry(order: OrderKey, entry: Any) -> None:
        node, item, at = entry
        await node_apply(node, item, at, order)

    @app.agent(node_in)
    async def node_agent(stream: Any) -> AsyncIterator[None]:
        s = stream.noack()
        async for event in s.events():
            msg = event.message
            p = msg.partition
            try:
                entry: tuple[OrderKey, str, NodeEvent | GpuSample | Binding, datetime] | None
                progress: SourceProgress | None = None
                entry = None
                if msg.topic == name[topics.NODE_BINDINGS.name]:
                    decoded = decode(event.value)
                    if isinstance(decoded, SourceProgress):
                        progress = decoded
                    else:
                        b, order = decoded
                        if not isinstance(b, Binding) or order is None:
                            raise DecodeError(
                                f"expected an ordered binding, got {type(b).__name__}"
                            )
                        entry = (order, b.node, b, b.at)
                else:
                    item = decode_input(event.value)
                    if isinstance(item, SourceProgress):
                        progress = item
                    else:
                        pl = item.payload
                        order = OrderKey(item.event_time, item.source, item.seq or 0, item.id)
                        if isinstance(pl, NodeEvent):
                            entry = (order, pl.node.name, pl, item.event_time)
                        elif isinstance(pl, GpuSampleEvent):
                            entry = (order, pl.sample.node, pl.sample, item.event_time)
                        else:
                            raise DecodeError(f"a {item.kind.value} event on {msg.topic}")
            except Exception as exc:
                await reject(event, describe_error(exc))
                await s.ack(event)
                continue
            if progress is not None:
                buf, wm, ready = await progressed(s, "nodes", p, node_states, event, progress)
                if wm is not None and await release(s, "nodes", p, buf, ready, node_entry):
                    node_states[released_key(p)] = wm.isoformat().encode()
                    await report("nodes", p, wm)
                continue
            buf = buffer("nodes", p, node_states)
            if entry is not None:
                order, node, it, at = entry
                if (why := buf.lateness(order.at)) is not None:
                    # a binding behind the mark is the pod stage re-sending after its restart
                    derived = msg.topic == name[topics.NODE_BINDINGS.name]
                    await drop_late(s, event, "redelivered" if derived else why, buf)
                else:
                    buf.add(order, (event, (node, it, at)))
            yield None

    # --- cluster view ------------------------------------------------------------------------

    holder: dict[str, InstantAnalysis] = {}

    def instants() -> InstantAnalysis:
        ia = holder.get("a")
        if ia is None:
            ia = _rebuild(cfg, cluster)
            holder["a"] = ia
        return ia

    async def publish_signals(out: list[Signal]) -> None:
        for sig in out:
            fp = sig.fingerprint.encode()
            if sig.state == "open":
                cluster[b"o/" + fp] = to_json(sig)
            else:
                cluster.pop(b"o/" + fp, None)
            counters["signals"] += 1
            await signals_out.send(key=fp, value=to_json(sig))

    def keep_peak(ia: InstantAnalysis, delta: ProfileUpdate) -> ProfileUpdate:
        """A task's GPU memory peak comes from telemetry, outside the event order: a profile
        made before the peak reached the pod's stage must not erase it."""
        if not isinstance(delta, TaskProfileUpdate) or delta.profile is None:
            return delta
        known = ia.analysis.tasks.get(delta.key)
        old = None if known is None else known.gpu_memory_peak_mib
        new = delta.profile.gpu_memory_peak_mib
        if old is None or (new is not None and new >= old):
            return delta
        return TaskProfileUpdate(
            delta.key, delta.profile.model_copy(update={"gpu_memory_peak_mib": old}), delta.at
        )

    def remember(delta: ProfileUpdate) -> None:
        if isinstance(delta, NodeProfileUpdate):
            k = b"n/" + delta.name.encode()
            profile: NodeProfile | TaskProfile | None = delta.profile
        else:
            k = b"t/" + delta.key.encode()
            profile = delta.profile
        if profile is None:
            cluster.pop(k, None)
        else:
            cluster[k] = profile.model_dump_json().encode()

    async def cluster_delta(order: OrderKey, delta: Any) -> None:
        ia = instants()
        delta = keep_peak(ia, delta)
        remember(delta)
        await publish_signals(ia.add(order, delta))

    @app.agent(cluster_in)
    async def cluster_agent(stream: Any) -> AsyncIterator[None]:
        s = stream.noack()
        async for event in s.events():
            delta: NodeProfileUpdate | TaskProfileUpdate | None = None
            order: OrderKey | None = None
            try:
                decoded = decode(event.value)
                if not isinstance(decoded, SourceProgress):
                    msg, order = decoded
                    if not isinstance(msg, NodeProfileUpdate | TaskProfileUpdate):
                        raise DecodeError(f"expected a profile delta, got {type(msg).__name__}")
                    delta = msg
            except Exception as exc:
                await reject(event, describe_error(exc))
                await s.ack(event)
                continue
            ia = instants()
            if isinstance(decoded, SourceProgress):
                buf, wm, ready = await progressed(s, "cluster", 0, cluster, event, decoded)
                if wm is not None and await release(s, "cluster", 0, buf, ready, cluster_delta):
                    await publish_signals(ia.release(wm))
                    cluster[b"~meta"] = orjson.dumps(ia.analysis.clock_state())
                    cluster[released_key(0)] = wm.isoformat().encode()
                continue
            buf = buffer("cluster", 0, cluster)
            if delta is None:
                continue
            elif order is None:
                # telemetry-driven (a memory peak): applied as it comes, after its instant's
                # ordered deltas if that instant is still open
                delta = keep_peak(ia, delta)
                remember(delta)
                await publish_signals(ia.add(OrderKey(delta.at, "\uffff", 0, "", 2), delta))
                await s.ack(event)
            elif buf.lateness(order.at) is not None:
                # deltas behind the mark are a stage re-sending after its restart
                await drop_late(s, event, "redelivered", buf)
            else:
                buf.add(order, (event, delta))
            yield None

    stats = WorkerStats(counters=counters, held=lambda: sum(len(b) for b in buffers.values()))
    return app, stats


def _rebuild(cfg: WorkerConfig, cluster: Any) -> InstantAnalysis:
    """The analysis as it was: its inputs replayed silently, its open signals and its schedule
    of deferred work restored."""
    a = FragmentationAnalysis(settings=cfg.analysis, typical=cfg.typical)
    ia = InstantAnalysis(a)
    raw_meta = cluster.get(b"~meta")
    raw_released = cluster.get(b"~released/0")
    if raw_meta is None or raw_released is None:
        return ia
    nodes = tasks = 0
    opened: dict[str, Signal] = {}
    for k, raw in sorted(cluster.items()):
        if k.startswith(b"n/"):
            profile = NodeProfile.model_validate_json(raw)
            a.apply(NodeProfileUpdate(k[2:].decode(), profile, profile.updated_at))
            nodes += 1
        elif k.startswith(b"t/"):
            task = TaskProfile.model_validate_json(raw)
            a.apply(TaskProfileUpdate(k[2:].decode(), task, task.created_at))
            tasks += 1
        elif k.startswith(b"o/"):
            opened[k[2:].decode()] = from_json(Signal, raw)
    clock = orjson.loads(raw_meta)
    if clock.get("now"):
        # learned typical pods come back from the tasks still held (not every pod ever seen)
        a.relearn_typical(datetime.fromisoformat(clock["now"]))
    a.restore_clock(clock)
    a.open = opened
    ia.watermark = datetime.fromisoformat(raw_released.decode())
    log.info(
        "cluster view rebuilt at %s: %d nodes, %d tasks, %d open signals",
        ia.watermark.isoformat(),
        nodes,
        tasks,
        len(opened),
    )
    return ia
