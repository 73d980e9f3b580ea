"""One API call of the actuator, answered or given up on: bounded retries, typed limits.

Every answer is read raw (``_preload_content=False``): an eviction's 429 must be told from a
throttled request by its Status causes, which the generated client's exception hides.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import aiohttp
import orjson

from connectors.backoff import Backoff
from models import ActionOutcome, ActuatorSettings

__all__ = [
    "ActuatorLimit",
    "Answer",
    "AttemptsExhausted",
    "Calls",
    "ConflictsExhausted",
    "LeaseGate",
    "NotHolding",
    "Send",
]

DISRUPTION_BUDGET_CAUSE = "DisruptionBudget"
"""The Status cause kube-apiserver puts on an eviction a PodDisruptionBudget refuses (policy/v1
DisruptionBudgetCause, in ``details.causes[].reason``); a 429 without it is API priority and
fairness throttling, worth a retry."""


class LeaseGate(Protocol):
    """Whether this actuator may act now: the Lease elector, or anything that says yes/no."""

    def holding(self) -> bool: ...


Send = Callable[[aiohttp.ClientTimeout], Awaitable[aiohttp.ClientResponse]]
"""Sends one request with the given timeout and returns the raw response."""


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    body: dict[str, Any]
    attempts: int

    @property
    def message(self) -> str:
        return str(self.body.get("message") or self.body.get("reason") or "")[:500]

    @property
    def cause_types(self) -> list[str]:
        # StatusCause's Go field Type is "reason" in JSON.
        causes = (self.body.get("details") or {}).get("causes") or []
        return [str(c.get("reason") or "") for c in causes if isinstance(c, dict)]

    @property
    def causes(self) -> list[str]:
        causes = (self.body.get("details") or {}).get("causes") or []
        return [str(c.get("message") or "") for c in causes if isinstance(c, dict)]

    @property
    def disruption_budget(self) -> bool:
        return self.status == 429 and DISRUPTION_BUDGET_CAUSE in self.cause_types


class ActuatorLimit(Exception):
    """A limit stopped the action before the cluster gave a final answer; ``outcome`` is how
    it is recorded."""

    outcome = ActionOutcome.FAILED

    def __init__(self, detail: str, *, status: int = 0, attempts: int = 0) -> None:
        super().__init__(detail)
        self.detail = detail
        self.status = status
        self.attempts = attempts


class NotHolding(ActuatorLimit):
    """This actuator does not hold the Lease (never did, or lost it): it must not act."""

    outcome = ActionOutcome.REFUSED


class AttemptsExhausted(ActuatorLimit):
    """Every allowed try failed with a server error, a throttle or no answer."""


class ConflictsExhausted(ActuatorLimit):
    """A read-modify-write lost to another writer (409) every allowed round."""


def _retryable(answer: Answer) -> bool:
    if answer.status == 0 or answer.status >= 500:
        return True
    return answer.status == 429 and not answer.disruption_budget


def _retry_after(response: aiohttp.ClientResponse) -> float:
    try:
        return float(response.headers.get("Retry-After", "0"))
    except ValueError:
        return 0.0


@dataclass
class Calls:
    """Sends calls while ``gate`` holds, retrying what is worth retrying a bounded number of
    times; anything final (2xx, 4xx, a PDB's 429) is returned for the caller to judge."""

    gate: LeaseGate
    settings: ActuatorSettings
    rng: random.Random = field(default_factory=random.Random)

    def check(self) -> None:
        if not self.gate.holding():
            raise NotHolding("not the holder of the actuator Lease")

    async def call(self, send: Send) -> Answer:
        s = self.settings
        backoff = Backoff(initial_s=s.retry_initial_s, max_s=s.retry_max_s, rng=self.rng)
        timeout = aiohttp.ClientTimeout(total=s.request_timeout_s)
        last = "no try made"
        for attempt in range(1, s.attempts + 1):
            self.check()
            answer, wait_hint = await self._once(send, timeout, attempt)
            if not _retryable(answer):
                return answer
            last = f"HTTP {answer.status}: {answer.message}" if answer.status else answer.message
            if attempt < s.attempts:
                # The server's Retry-After (APF sends one with its 429) counts, up to our cap.
                await asyncio.sleep(max(backoff.next(), min(wait_hint, s.retry_max_s)))
        raise AttemptsExhausted(
            f"gave up after {s.attempts} tries; last: {last}",
            status=answer.status,
            attempts=s.attempts,
        )

    async def _once(
        self, send: Send, timeout: aiohttp.ClientTimeout, attempt: int
    ) -> tuple[Answer, float]:
        try:
            response = await send(timeout)
            async with response:
                raw = await response.read()
                status, wait_hint = response.status, _retry_after(response)
        except (aiohttp.ClientError, TimeoutError) as exc:
            return Answer(0, {"message": f"no answer: {type(exc).__name__}: {exc}"}, attempt), 0.0
        try:
            body = orjson.loads(raw) if raw else {}
        except orjson.JSONDecodeError:
            body = {"message": raw[:300].decode(errors="replace")}
        return Answer(status, body if isinstance(body, dict) else {}, attempt), wait_hint
