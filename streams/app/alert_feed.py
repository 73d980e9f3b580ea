"""The signals topic into the alert sinks, at least once: a batch's offsets are committed only
after every sink accepted its alerts or they were dead-lettered, so a crash or a rebalance reads
them again, and the dispatcher's memory of the latest state per fingerprint drops the copies.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import UTC, datetime
from typing import Any

from aiokafka.errors import CommitFailedError

from connectors.alerts import AlertDispatcher
from connectors.alerts.dispatcher import DeadLetterWriter
from models import Signal, from_json
from models.refusal import Refusal

__all__ = ["AlertFeed"]

log = logging.getLogger(__name__)


class AlertFeed:
    def __init__(
        self,
        *,
        consumer: Any,
        dispatcher: AlertDispatcher,
        dead_letter: DeadLetterWriter,
    ) -> None:
        """``consumer``: a started aiokafka consumer on the signals topic, auto-commit off."""
        self.consumer = consumer
        self.dispatcher = dispatcher
        self.dead_letter = dead_letter
        self.counts = {"records": 0, "unreadable": 0}

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            batch = await self.consumer.getmany(timeout_ms=500, max_records=1000)
            if not batch:
                continue
            for tp, records in batch.items():
                for r in records:
                    await self._take(tp.topic, tp.partition, r.offset, r.value)
            if not await self._settled_unless(stop):
                return  # stopping: not committed, so read again by the next run
            try:
                await self.consumer.commit()
            except CommitFailedError as exc:
                # a rebalance: the records are read again, and their alerts are repeats
                log.warning("offsets not committed (%s); records will be re-read", exc)

    async def _take(self, topic: str, partition: int, offset: int, value: bytes | None) -> None:
        self.counts["records"] += 1
        raw = value or b""
        try:
            signal = from_json(Signal, raw)
        except Exception as exc:  # kept with why, never dropped
            self.counts["unreadable"] += 1
            await self.dead_letter(
                Refusal(
                    source=f"kafka/{topic}",
                    reason="unreadable_signal",
                    detail=f"{topic}/{partition}@{offset}: " + " ".join(str(exc).split())[:500],
                    raw=Refusal.cut(raw.decode("utf-8", errors="replace")),
                    at=datetime.now(UTC),
                )
            )
            return
        self.dispatcher.submit(signal)

    async def _settled_unless(self, stop: asyncio.Event) -> bool:
        """True once the dispatcher settled; False if ``stop`` came first."""
        settled = asyncio.create_task(self.dispatcher.settled())
        stopping = asyncio.create_task(stop.wait())
        try:
            await asyncio.wait((settled, stopping), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (settled, stopping):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        return settled.done() and not settled.cancelled()
