"""The three stages of the Faust runner, each the pipeline's operator for its key:

- tasks (keyed by pod): pod events and scheduler events -> ``TaskJoin``; sends task deltas to
  the cluster view and bindings to the pod's node;
- nodes (keyed by node): node events, GPU samples, the kubelet's SystemOOM events and bindings
  -> ``NodeJoin``; sends node deltas to the cluster view, and the pods' memory peaks beside
  them for the history (the view drops them);
- cluster view (one partition, low rate): deltas (with the quota refusals the tasks stage
  passes on), and quota and queue objects straight from their topic -> ``ClusterAnalysis``,
  one event-time instant at a time; sends signals, and the view's report on each instant
  (fragmentation, pending explanations) for the history.

Keyed operators' state lives in the stage's table, one entry per key, and is loaded into the
operator when a key is first used after a start or a rebalance; the cluster view is restored
whole from its table on first use.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson

from models import (
    GpuSampleEvent,
    NodeEvent,
    PodEvent,
    QueueEvent,
    SchedulingEvent,
    Signal,
    to_json,
)
from models.progress import SourceProgress
from streams.cluster_analysis import ClusterAnalysis
from streams.distributed.codec import (
    DecodeError,
    decode,
    decode_input,
    encode,
    encode_progress,
    encode_report,
)
from streams.distributed.key_state import tagged, untagged
from streams.distributed.stage import Decoded, HeldInput, StageCounters, released_key
from streams.distributed.state_schema import CLUSTER_CLOCK, VIEW_PREFIXES, StateSchemaError
from streams.instants import Instants, OrderKey
from streams.operator import StateChanges
from streams.pipeline import Evaluation, InstantOutput, PipelineDef
from streams.planners.acting import Acting
from streams.profiles.join import (
    Binding,
    NodeProfileUpdate,
    PeakReport,
    QueueUpdate,
    QuotaRefused,
    TaskProfileUpdate,
)
from streams.profiles.operators import (
    NODE_RANK,
    TASK_RANK,
    NodeInput,
    TaskInput,
    is_system_oom,
    queue_update,
    quota_refused,
)

log = logging.getLogger(__name__)

ACTING_KEY = b"~acting"
"""The acting step's state (the gate's ledger, the quarantined nodes) in the cluster table;
``~`` keeps it apart from the view's entries."""


@dataclass(frozen=True, slots=True)
class Outlets:
    """The worker's output topics, and the names of the input topics a stage tells apart."""

    bindings: Any
    deltas: Any
    signals: Any
    actions: Any
    bindings_topic: str
    queues_topic: str
    binding_partitions: int
    reports: Any = None
    """The cluster view's per-instant reports; None: not published."""
    flush: Callable[[], Awaitable[None]] | None = None
    """Wait until every message handed to the producer is acknowledged (None: nothing to wait
    for, as in tests without a broker)."""


async def flushed(out: Outlets) -> None:
    if out.flush is not None:
        await out.flush()


def persist(table: Any, changes: StateChanges, *, mark: datetime | None = None) -> None:
    """Write an operator's changed state. Each stage calls it once the outputs of what changed
    it are acknowledged (``flushed``), at its release: a worker killed before the state is
    written reads the items again onto the old state and sends the outputs again, exact
    copies downstream. Written before its outputs were acknowledged, the state could survive
    a kill -9 that lost them (the producer sends each partition's batch on its own), and the
    successor, finding the item in its state, sent nothing: the chaos soak's history missed
    task and node profile rows that way. For the same reason a stage forgotten while it sent
    (a revocation, or its partitions read again from their start) writes nothing afterwards:
    the operator it would write from is no longer the one the table and the reread input will
    rebuild. ``mark``: the release this state belongs to, kept with each key's state
    (``key_state.py``) so that a successor restoring an older mark does not apply the
    release's items to it again."""
    for key, value in changes.items():
        if value is None:
            table.pop(key.encode(), None)
        else:
            table[key.encode()] = value if mark is None else tagged(mark, value)


async def _persist_after_flush(
    table: Any, out: Outlets, current: Callable[[], Any], mark: datetime
) -> None:
    """What the partition's release changed, written once its outputs are acknowledged; the
    agent handles one partition's event at a time, so every key changed since the last write
    is this partition's (its changelog partition is the event's)."""
    op = current()
    await flushed(out)
    if op is current():  # not forgotten meanwhile (see persist)
        persist(table, op.snapshot(), mark=mark)


class _KeyLoader:
    """Loads a key's state into a keyed operator on its first use since the last reset, and
    says which of the key's items that state already holds (``key_state.py``)."""

    def __init__(self, table: Any) -> None:
        self.table = table
        self.holds_upto: dict[str, datetime | None] = {}

    def load(self, op: Any, key: str) -> datetime | None:
        """The mark the key's stored state was written at (None: none, or untagged)."""
        if key not in self.holds_upto:
            raw = self.table.get(key.encode())
            mark, state = (None, b"") if raw is None else untagged(raw)
            op.restore({} if raw is None else {key: state})
            self.holds_upto[key] = mark
        return self.holds_upto[key]

    def holds(self, op: Any, key: str, order: OrderKey) -> bool:
        """The key's stored state already holds the item at ``order``: a release its previous
        owner wrote the key's state for, and whose mark it did not write."""
        mark = self.load(op, key)
        return mark is not None and order.at <= mark


def ordered(item: Any) -> OrderKey:
    return OrderKey(item.event_time, item.seq or 0, item.source, item.id)


class TaskLogic:
    name = "tasks"

    def __init__(self, pipeline: PipelineDef, table: Any, out: Outlets) -> None:
        self.pipeline, self.table, self.out = pipeline, table, out
        self.reset()

    def reset(self) -> None:
        self.op = self.pipeline.task_join()
        self.keys = _KeyLoader(self.table)

    def decode(self, topic: str, raw: bytes) -> Decoded:
        item = decode_input(raw)
        if isinstance(item, SourceProgress):
            return item
        p = item.payload
        if not isinstance(p, PodEvent | SchedulingEvent):
            raise DecodeError(f"a {item.kind.value} event on {topic}")
        if isinstance(p, SchedulingEvent) and not p.event.pod_name:
            # a quota's refusal of an owner's pod goes on to the cluster view, as the embedded
            # join passes it; the rest is about a node: nothing for a task, still in order
            return HeldInput(ordered(item), quota_refused(item))
        return HeldInput(ordered(item), TaskInput(item.key, p, item.event_time, item.id))

    async def apply(self, order: OrderKey, item: object) -> None:
        if item is None:
            return
        if isinstance(item, QuotaRefused):
            o = order._replace(rank=TASK_RANK, sub=0)
            owner = f"{item.event.object_namespace or 'default'}/{item.event.object_name or ''}"
            await self.out.deltas.send(key=owner.encode(), value=encode(item, order=o))
            return  # no state: the refusal is the cluster view's to keep
        assert isinstance(item, TaskInput)
        if self.keys.holds(self.op, item.key, order):
            return
        op = self.op
        outs = op.apply(item)
        deltas = [o for o in outs if isinstance(o, TaskProfileUpdate)]
        for sub, u in enumerate(deltas):
            o = order._replace(rank=TASK_RANK, sub=sub)
            await self.out.deltas.send(key=item.key.encode(), value=encode(u, order=o))
        binds = [o for o in outs if isinstance(o, Binding)]
        for sub, b in enumerate(binds):
            o = order._replace(rank=TASK_RANK, sub=sub)
            await self.out.bindings.send(key=b.node.encode(), value=encode(b, order=o))

    async def settle(self, p: int, upto: datetime) -> None:
        await _persist_after_flush(self.table, self.out, lambda: self.op, upto)

    async def report(self, p: int, upto: datetime) -> None:
        progress = encode_progress(SourceProgress(source=f"tasks/{p}", upto=upto, kinds=()))
        for n in range(self.out.binding_partitions):
            await self.out.bindings.send(key=b"", value=progress, partition=n)
        await self.out.deltas.send(key=b"", value=progress, partition=0)


class NodeLogic:
    name = "nodes"

    def __init__(self, pipeline: PipelineDef, table: Any, out: Outlets) -> None:
        self.pipeline, self.table, self.out = pipeline, table, out
        self.reset()

    def reset(self) -> None:
        self.op = self.pipeline.node_join()
        self.keys = _KeyLoader(self.table)

    def decode(self, topic: str, raw: bytes) -> Decoded:
        if topic == self.out.bindings_topic:
            decoded = decode(raw)
            if isinstance(decoded, SourceProgress):
                return decoded
            b, order = decoded
            if not isinstance(b, Binding) or order is None:
                raise DecodeError(f"expected an ordered binding, got {type(b).__name__}")
            return HeldInput(order, NodeInput(b.node, b, b.at), derived=True)
        item = decode_input(raw)
        if isinstance(item, SourceProgress):
            return item
        p = item.payload
        if isinstance(p, NodeEvent):
            return HeldInput(ordered(item), NodeInput(p.node.name, p, item.event_time))
        if isinstance(p, GpuSampleEvent):
            return HeldInput(ordered(item), NodeInput(p.sample.node, p.sample, item.event_time))
        if isinstance(p, SchedulingEvent):
            # the scheduler events' topic is keyed by pod or node: only the kubelet's SystemOOM
            # is about a node; the rest is the tasks stage's, held here only to keep the order
            if not is_system_oom(p) or p.event.node is None:
                return HeldInput(ordered(item), None)
            return HeldInput(ordered(item), NodeInput(p.event.node, p, item.event_time, item.id))
        raise DecodeError(f"a {item.kind.value} event on {topic}")

    async def apply(self, order: OrderKey, item: object) -> None:
        if item is None:
            return
        assert isinstance(item, NodeInput)
        if self.keys.holds(self.op, item.node, order):
            return
        op = self.op
        outs = op.apply(item)
        # a node's profile and its pods' new memory peaks, in the order the embedded join
        # gives them (``ordered_deltas``): the peaks go to the history, not to a pod's stage
        deltas = [o for o in outs if isinstance(o, NodeProfileUpdate | PeakReport)]
        for sub, u in enumerate(deltas):
            # a binding's delta keeps the binding's place among its pod's outputs
            o = order._replace(
                rank=NODE_RANK, sub=order.sub if isinstance(item.item, Binding) else sub
            )
            key = u.name if isinstance(u, NodeProfileUpdate) else u.node
            await self.out.deltas.send(key=key.encode(), value=encode(u, order=o))

    async def settle(self, p: int, upto: datetime) -> None:
        await _persist_after_flush(self.table, self.out, lambda: self.op, upto)

    async def report(self, p: int, upto: datetime) -> None:
        progress = encode_progress(SourceProgress(source=f"nodes/{p}", upto=upto, kinds=()))
        await self.out.deltas.send(key=b"", value=progress, partition=0)


class ClusterLogic:
    name = "cluster"

    def __init__(
        self,
        pipeline: PipelineDef,
        table: Any,
        out: Outlets,
        counters: StageCounters,
        *,
        observe: Callable[[InstantOutput], None] | None = None,
    ) -> None:
        """``observe``: told each evaluated instant in process (the worker's domain metrics),
        after its outputs were sent."""
        self.pipeline, self.table, self.out, self.counters = pipeline, table, out, counters
        self.observe = observe
        self._instants: Instants[Any, Signal] | None = None
        self._op: ClusterAnalysis | None = None
        self._acting: Acting | None = None
        self._evaluation: Evaluation | None = None
        self._evaluated: list[InstantOutput] = []
        """What the instants released by the current call left (the signals go out apart,
        with those of late input)."""
        self._disagreed: dict[str, int] = {}
        """What the current operator had counted when last read (see ``_count``)."""
        self._holds_upto: datetime | None = None
        """How far the restored view goes: the instants' mark its schedule was written with
        (``key_state.py``). Its items come again after a worker killed between the view's
        state and the stage's mark; applied again, a pod added and deleted in between counted
        twice in ``arrived_pct`` (33.2 % against 26.3 % at one instant)."""

    def reset(self) -> None:
        self._instants = None

    def instants(self) -> Instants[Any, Signal]:
        """The cluster view, restored from the table on first use after a start or rebalance."""
        if self._instants is None:
            op = self._op = self.pipeline.cluster()
            self._disagreed = {}
            ia: Instants[Any, Signal] = Instants(op)
            raw_released = self.table.get(released_key(0))
            entries = {k.decode(): v for k, v in self.table.items() if not k.startswith(b"~")}
            self._holds_upto = None
            if CLUSTER_CLOCK in entries:
                self._holds_upto, entries[CLUSTER_CLOCK] = untagged(entries[CLUSTER_CLOCK])
            marks = [m for m in (_when(raw_released), self._holds_upto) if m is not None]
            if marks and CLUSTER_CLOCK in entries:
                op.restore(entries)
                ia.watermark = max(marks)
                _log_rebuilt(op, ia.watermark)
            elif CLUSTER_CLOCK not in entries and any(k.startswith(VIEW_PREFIXES) for k in entries):
                # `gpufrag worker` refuses such a table before it starts (state_schema.py);
                # met here all the same, it stops the stage rather than start it empty
                raise StateSchemaError(
                    "the cluster view's table holds a view saved without its schedule: "
                    "restart the workers, which check the app id's state first"
                )
            else:
                # a fresh view (or one whose worker stopped before its first mark: nothing of
                # its input was committed, so all of it is read again onto an empty view); its
                # changes go to the table from now on
                op.restore({})
            self._acting = self.pipeline.acting()
            raw_acting = self.table.get(ACTING_KEY)
            if raw_acting is not None:
                self._acting.restore(orjson.loads(raw_acting))
            self._evaluation = Evaluation(op, self._acting, reports=self.out.reports is not None)
            self._instants = ia
        return self._instants

    def _on_instant(self, at: datetime, signals: list[Signal]) -> None:
        """The same per-instant composition as the embedded runner's (``Pipeline.instant``)."""
        if self._evaluation is not None:
            self._evaluated.append(self._evaluation.instant(at, signals))

    def decode(self, topic: str, raw: bytes) -> Decoded:
        if topic == self.out.queues_topic:
            item = decode_input(raw)
            if isinstance(item, SourceProgress):
                return item
            if not isinstance(item.payload, QueueEvent):
                raise DecodeError(f"a {item.kind.value} event on {topic}")
            # the embedded runner's join passes it through with the same order key
            return HeldInput(ordered(item), queue_update(item))
        decoded = decode(raw)
        if isinstance(decoded, SourceProgress):
            return decoded
        delta, order = decoded
        if isinstance(delta, PeakReport):
            return None  # history only: the view keeps no pod's memory peak
        if not isinstance(delta, NodeProfileUpdate | TaskProfileUpdate | QuotaRefused):
            raise DecodeError(f"expected a profile delta, got {type(delta).__name__}")
        if order is None:  # a worker of an older version, sending a peak-driven task delta
            raise DecodeError("a profile delta without its place in the event order")
        return HeldInput(order, delta, derived=True)

    async def apply(self, order: OrderKey, item: object) -> None:
        assert isinstance(item, NodeProfileUpdate | TaskProfileUpdate | QueueUpdate | QuotaRefused)
        ia = self.instants()
        if self._holds_upto is not None and order.at <= self._holds_upto:
            self.counters.add("redelivered")
            return  # the restored view holds it, and its instant was evaluated and sent
        await self._publish(ia.add(order, item))

    async def settle(self, p: int, upto: datetime) -> None:
        released = self.instants().release(upto, on_instant=self._on_instant)
        await self._publish(released, settled=True)

    async def report(self, p: int, upto: datetime) -> None:
        """The last stage: nobody downstream waits for its progress."""

    async def _publish(self, outputs: list[Signal], *, settled: bool = False) -> None:
        ia = self.instants()
        self._count()
        evaluated, self._evaluated = self._evaluated, []
        for sig in outputs:
            self.counters.add("signals")
            await self.out.signals.send(key=sig.fingerprint.encode(), value=to_json(sig))
        for instant in evaluated:  # records and requests alike, keyed by action id
            for action in instant.actions:
                self.counters.add("actions")
                await self.out.actions.send(key=action.id.encode(), value=to_json(action))
            for request in instant.requests:
                self.counters.add("action_requests")
                await self.out.actions.send(key=request.id.encode(), value=to_json(request))
        for instant in evaluated:
            if instant.report is not None and self.out.reports is not None:
                key = instant.at.isoformat().encode()
                await self.out.reports.send(key=key, value=encode_report(instant.report))
            if self.observe is not None:
                self.observe(instant)
        if ia is not self._instants:
            return  # forgotten meanwhile: its state is not written (see persist)
        await flushed(self.out)
        if ia is not self._instants:
            return
        op = self._op
        assert op is not None
        changes = op.snapshot()
        if any(e.actions or e.requests for e in evaluated) and self._acting is not None:
            self.table[ACTING_KEY] = orjson.dumps(self._acting.snapshot())
        if ia.watermark is not None and (changes or settled):
            # the schedule goes last (the state entries and the acting step's are on the
            # changelog before it, in order), tagged with the instants' mark: how far the
            # state it closes goes
            clock = changes.pop(CLUSTER_CLOCK, None) or op.clock_entry()
            changes[CLUSTER_CLOCK] = tagged(ia.watermark, clock)
        persist(self.table, changes)

    def _count(self) -> None:
        """The operator's new disagreements into the worker's counters. A restored operator
        counts from zero (its count is not state), so the worker adds what it found since,
        and its counter never goes down across a rebalance."""
        op = self._op
        assert op is not None
        for reason, n in op.disagreements.items():
            if n > self._disagreed.get(reason, 0):
                self.counters.add(f"disagreements/{reason}", n - self._disagreed.get(reason, 0))
                self._disagreed[reason] = n


def _when(raw: bytes | None) -> datetime | None:
    return None if raw is None else datetime.fromisoformat(raw.decode())


def _log_rebuilt(op: ClusterAnalysis, at: datetime) -> None:
    log.info(
        "cluster view rebuilt at %s: %d nodes, %d tasks, %d open signals",
        at.isoformat(),
        len(op.view.nodes),
        len(op.view.tasks),
        len(op.open),
    )
