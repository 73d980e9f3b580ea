"""The distributed runner's outputs into the history store: signals, actions, dead letters,
and (``topic_history``) the input events, profile snapshots and per-instant cluster reports.

At least once, idempotently: offsets are committed only after the rows they carried are in the
store (or, if the store stays down, spooled by the sink), and each row has the store's key, so a
record read twice after a restart lands on the row it already wrote. Workers can send a signal
again after a crash, always as an exact copy; those copies are dropped here (a bounded memory of
recent keys), so they do not even reach the store as a second insert.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections import OrderedDict
from datetime import UTC, datetime
from typing import Any

import orjson
from aiokafka.errors import CommitFailedError

from connectors.clickhouse.rows import Row, action_row, refusal_row, signal_row
from connectors.clickhouse.sink import ClickHouseSink
from models import Action, ActionOutcome, Signal, from_json
from models.refusal import Refusal
from streams.app.sinks.topic_history import HistoryRows
from streams.distributed import topics

log = logging.getLogger(__name__)
RECENT_KEYS = 100_000
"""Signal keys remembered to drop repeats; repeats come right after a worker restart."""


def sink_topics(prefix: str) -> list[str]:
    """Every topic a sink reads: the workers' outputs, and the inputs they read."""
    inputs = sorted(spec.full_name(prefix) for spec in topics.INPUT_BY_KIND.values())
    outputs = (topics.SIGNALS, topics.DEAD_LETTER, topics.ACTIONS)
    internal = (topics.CAPACITY_DELTAS, topics.CLUSTER_REPORTS)
    return [
        *(t.full_name(prefix) for t in outputs),
        *inputs,
        *(t.full_name(prefix) for t in internal),
    ]


def topic_sink(prefix: str, *, consumer: Any, sink: ClickHouseSink, run_id: str) -> TopicSink:
    """The sink of the topics under ``prefix``; ``consumer`` subscribed to ``sink_topics``."""
    inputs = frozenset(spec.full_name(prefix) for spec in topics.INPUT_BY_KIND.values())
    history = HistoryRows(
        run_id=run_id,
        inputs=inputs,
        deltas=topics.CAPACITY_DELTAS.full_name(prefix),
        reports=topics.CLUSTER_REPORTS.full_name(prefix),
    )
    return TopicSink(
        consumer=consumer,
        sink=sink,
        run_id=run_id,
        signals_topic=topics.SIGNALS.full_name(prefix),
        dead_letter_topic=topics.DEAD_LETTER.full_name(prefix),
        actions_topic=topics.ACTIONS.full_name(prefix),
        history=history,
    )


class TopicSink:
    def __init__(
        self,
        *,
        consumer: Any,
        sink: ClickHouseSink,
        run_id: str,
        signals_topic: str,
        dead_letter_topic: str,
        actions_topic: str | None = None,
        history: HistoryRows | None = None,
    ) -> None:
        """``consumer``: a started aiokafka consumer subscribed to every topic named here
        (``history``'s too), auto-commit off."""
        self.consumer = consumer
        self.sink = sink
        self.run_id = run_id
        self.signals_topic = signals_topic
        self.dead_letter_topic = dead_letter_topic
        self.actions_topic = actions_topic
        self.history = history
        self._recent: OrderedDict[tuple[str, ...], None] = OrderedDict()
        self._settled: OrderedDict[str, None] = OrderedDict()
        """Action ids whose outcome this sink stored: a proposal of one read later is a
        worker's copy, never written over the outcome."""
        self.counts = {
            "signals": 0,
            "repeats": 0,
            "dead_letters": 0,
            "unreadable": 0,
            "actions": 0,
            "action_requests": 0,
            "stale_proposals": 0,
        }

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            batch = await self.consumer.getmany(timeout_ms=500, max_records=1000)
            rows: dict[str, list[Row]] = {}
            for tp, records in batch.items():
                for r in records:
                    if self.history is not None and self.history.handles(tp.topic):
                        for name, kept in self.history.rows(tp.topic, r.value or b""):
                            rows.setdefault(name, []).append(kept)
                        continue
                    table, row = self._row(tp.topic, tp.partition, r.offset, r.timestamp, r.value)
                    if row is not None:
                        rows.setdefault(table, []).append(row)
            if not batch:
                continue
            for table, table_rows in rows.items():
                await self.sink.write(table, table_rows)
            await self.sink.flush()
            try:
                await self.consumer.commit()
            except CommitFailedError as exc:
                # a rebalance: the records are read again, and the rows are keyed, so writing
                # them twice stores them once
                log.warning("offsets not committed (%s); records will be re-read", exc)

    def _row(
        self, topic: str, partition: int, offset: int, ts_ms: int, value: bytes | None
    ) -> tuple[str, Row | None]:
        raw = value or b""
        if topic == self.signals_topic:
            try:
                sig = from_json(Signal, raw)
            except Exception as exc:  # a bad record is kept, with why, never dropped
                self.counts["unreadable"] += 1
                return "dead_letter", _dead_letter(
                    topic, partition, offset, ts_ms, f"unreadable signal: {exc}", raw
                )
            key = (
                sig.fingerprint,
                sig.state,
                sig.opened_at.isoformat(),
                "" if sig.resolved_at is None else sig.resolved_at.isoformat(),
            )
            if key in self._recent:
                self.counts["repeats"] += 1
                return "signals", None
            _remember(self._recent, key)
            self.counts["signals"] += 1
            return "signals", signal_row(self.run_id, sig)
        if topic == self.actions_topic:
            return self._action(topic, partition, offset, ts_ms, raw)
        self.counts["dead_letters"] += 1
        try:
            body = orjson.loads(raw)
            if isinstance(body, dict) and "source" in body:  # a watcher's refused input
                return "dead_letter", refusal_row(Refusal.model_validate(body))
            reason = str(body["reason"])
            origin = f"{body['topic']}/{body['partition']}@{body['offset']}"
        except Exception:
            reason, origin = "dead letter in an unknown format", f"{topic}/{partition}@{offset}"
        return "dead_letter", _dead_letter(
            topic, partition, offset, ts_ms, f"{origin}: {reason}", raw
        )

    def _action(
        self, topic: str, partition: int, offset: int, ts_ms: int, raw: bytes
    ) -> tuple[str, Row | None]:
        """An audit record becomes its row (keyed by action id: a later outcome of the same
        action replaces the proposal); a request is the actuator's input, not history.

        A worker restarted after planning sends its proposals again, and one may come after
        the actuator's outcome: in the long chaos soak two executed evictions were stored as
        proposed, the copies written last. A proposal of an action whose outcome this sink
        stored is dropped. (A sink restarted between the two, its commit past the outcome,
        would still store the copy: it does not read the store back.)"""
        try:
            body = orjson.loads(raw)
            if isinstance(body, dict) and "op" in body:
                self.counts["action_requests"] += 1
                return "actions", None
            action = from_json(Action, raw)
        except Exception as exc:  # kept, with why, never dropped
            self.counts["unreadable"] += 1
            return "dead_letter", _dead_letter(
                topic, partition, offset, ts_ms, f"unreadable action: {exc}", raw
            )
        if action.outcome is ActionOutcome.PROPOSED:
            if action.id in self._settled:
                self.counts["stale_proposals"] += 1
                return "actions", None
        else:
            _remember(self._settled, action.id)
        self.counts["actions"] += 1
        return "actions", action_row(self.run_id, action)


def _remember(keys: OrderedDict[Any, None], key: Any) -> None:
    """``key`` as the newest of ``keys``, the oldest forgotten past ``RECENT_KEYS``."""
    keys[key] = None
    keys.move_to_end(key)
    if len(keys) > RECENT_KEYS:
        keys.popitem(last=False)


def _dead_letter(
    topic: str, partition: int, offset: int, ts_ms: int, reason: str, raw: bytes
) -> Row:
    where = f"{topic}/{partition}@{offset}"
    return {
        # the record's place on the bus: reading it again writes the same row
        "id": hashlib.sha1(where.encode(), usedforsecurity=False).hexdigest(),
        "ts": datetime.fromtimestamp(ts_ms / 1000, UTC),
        "target": f"topic:{topic}",
        "reason": reason,
        "row": raw.decode("utf-8", errors="replace"),
    }
