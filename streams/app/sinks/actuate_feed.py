"""The actions topic into the actuator and its outcomes back onto the topic, at least once.

Only request records (those with "op") are the actuator's; audit records, its own outcomes
among them, are `gpufrag sink`'s. A batch's offsets are committed only after each request's
outcome was acknowledged by the broker, so a crash reads the batch again; the actuator answers
an id it already carried out from memory (within one process), and a process that takes a
partition over skips each request whose final outcome it reads ahead on the partition
(``carried_out.py``). What remains: an action carried out whose outcome never reached the
broker (the process killed between the two) is carried out again by the next owner. A request
that does not validate is dead-lettered.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import orjson
from aiokafka.errors import CommitFailedError
from pydantic import TypeAdapter, ValidationError

from connectors.kube import Actuator, Executor, LeaseElector, api_client_for
from models import ActionOutcome, ActionRequest, GpufragSettings, to_json
from models.refusal import Refusal
from streams.app.sinks.actuator_breaker import BreakingActuator
from streams.app.sinks.carried_out import CarriedOut
from streams.app.sinks.domain_metrics import ActionTally
from streams.runner.fanout import RequestActuator

__all__ = ["ActuateFeed", "actuator_for"]

log = logging.getLogger(__name__)

REQUESTS: TypeAdapter[ActionRequest] = TypeAdapter(ActionRequest)


class ActuateFeed:
    def __init__(
        self,
        *,
        actuator: RequestActuator,
        producer: Any,
        topic: str,
        dead_letter: Callable[[Refusal], Awaitable[None]],
        holding: Callable[[], bool] = lambda: True,
        tally: ActionTally | None = None,
        remembered_ids: int = 10_000,
    ) -> None:
        """``producer``: a started acked producer; ``topic``: the actions topic, where the
        outcomes go keyed by action id; ``holding``: False once an enforcing actuator lost
        the Lease (the feed then stops without committing); ``tally``: counts each record of
        what was carried out, for ``gpufrag_actions_total``; ``remembered_ids``: how many ids
        with an outcome on the topic are kept (``carried_out.py``)."""
        self.actuator = actuator
        self.producer = producer
        self.topic = topic
        self.dead_letter = dead_letter
        self.holding = holding
        self.requests = 0
        self.invalid = 0
        self.outcomes: Counter[str] = Counter()
        self.tally = tally
        self.carried_out = CarriedOut(limit=remembered_ids)

    async def run(self, consumer: Any, stop: asyncio.Event) -> None:
        """Until ``stop``, or until the Lease is lost. ``consumer``: a started aiokafka
        consumer on the actions topic, auto-commit off."""
        read_ahead: set[Any] = set()  # per joining of the group: what may be read again
        while not stop.is_set() and self.holding():
            batch = await consumer.getmany(timeout_ms=500, max_records=100)
            if not batch:
                continue
            for tp, records in batch.items():
                if tp not in read_ahead:
                    read_ahead.add(tp)
                    await self._read_ahead(consumer, tp, records[-1].offset + 1)
                for r in records:
                    self.carried_out.note(r.value or b"")
                for r in records:
                    if not await self._take(tp.topic, tp.partition, r.offset, r.value or b""):
                        return  # the Lease went mid-batch: not committed, read again
            try:
                await consumer.commit()
            except CommitFailedError as exc:
                # a rebalance: the records are read again, and acting on an id twice is safe
                log.warning("offsets not committed (%s); records will be re-read", exc)

    async def _read_ahead(self, consumer: Any, tp: Any, resume: int) -> None:
        """The first batch of a partition since this feed joined the group starts at the
        group's commit: note the outcomes between it and the partition's end (a predecessor's,
        for requests it carried out and did not commit), then read on from ``resume``."""
        end = (await consumer.end_offsets([tp]))[tp]
        at = resume
        while at < end and tp in consumer.assignment() and self.holding():
            got = await consumer.getmany(tp, timeout_ms=1000, max_records=500)
            for r in got.get(tp, []):
                self.carried_out.note(r.value or b"")
                at = r.offset + 1
        if tp in consumer.assignment():
            consumer.seek(tp, resume)

    async def _take(self, topic: str, partition: int, offset: int, raw: bytes) -> bool:
        """False when the request was refused for want of the Lease (nothing published)."""
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return True  # not a request: the sink dead-letters what it cannot read
        if not isinstance(body, dict) or "op" not in body:
            return True  # an audit record, for the sink
        self.requests += 1
        where = f"{topic}/{partition}@{offset}"
        try:
            request = REQUESTS.validate_python(body)
        except ValidationError as exc:
            self.invalid += 1
            await self._refuse(topic, "invalid_action_request", f"{where}: {exc}", raw)
            return True
        if request.id in self.carried_out:
            # its outcome is on the topic already: carried out by a predecessor (or by this
            # process before a rebalance), so neither the API nor the topic hears of it again
            self.outcomes["already carried out"] += 1
            return True
        try:
            action = await self.actuator.act(request)
        except Exception as exc:  # a bug, not the cluster's answer: kept, with why
            log.exception("actuator failed on %s", where)
            self.outcomes["error"] += 1
            await self._refuse(topic, "actuator_error", f"{where}: {exc!r}", raw)
            return True
        if action.outcome is ActionOutcome.REFUSED and not self.holding():
            return False
        await self.producer.send_and_wait(self.topic, key=action.id.encode(), value=to_json(action))
        self.outcomes[action.outcome.value] += 1
        if self.tally is not None:
            self.tally.count(action)
        return True

    async def _refuse(self, topic: str, reason: str, detail: str, raw: bytes) -> None:
        await self.dead_letter(
            Refusal(
                source=f"kafka/{topic}",
                reason=reason,
                detail=" ".join(detail.split())[:500],
                raw=Refusal.cut(raw.decode("utf-8", errors="replace")),
                at=datetime.now(UTC),
            )
        )

    def summary(self) -> str:
        by = ", ".join(f"{n} {o}" for o, n in sorted(self.outcomes.items())) or "no outcomes"
        return f"{self.requests} requests read ({self.invalid} invalid, dead-lettered): {by}"


@contextlib.asynccontextmanager
async def actuator_for(
    settings: GpufragSettings,
) -> AsyncIterator[tuple[RequestActuator, LeaseElector | None]]:
    """The actuator the settings ask for. Enforcing only with ``guardrails.mode=enforce``: an
    API client and a running Lease elector (released on exit), behind the circuit breaker
    (``actuator_breaker.py``); otherwise no API client at all, and every request is answered
    as proposed."""
    if settings.guardrails.mode != "enforce":
        yield Actuator(settings=settings.actuator), None
        return
    client = await api_client_for(settings.kube)
    try:
        elector = LeaseElector(api_client=client, settings=settings.actuator)
        executor = Executor(
            api_client=client, gate=elector, settings=settings.actuator, identity=elector.identity
        )
        done = asyncio.Event()
        electing = asyncio.create_task(elector.run(stop=done))
        try:
            acting = Actuator(settings=settings.actuator, executor=executor)
            yield BreakingActuator(acting, settings=settings.guardrails), elector
        finally:
            done.set()
            await electing  # releases the Lease, so a standby takes over at once
    finally:
        await client.close()
