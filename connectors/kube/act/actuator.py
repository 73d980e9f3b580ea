"""The one way gpufrag changes a cluster: typed requests in, one ``Action`` audit record out.

Dry run is a matter of construction, not of a flag checked at call time: a dry-run actuator is
built without an executor, so it holds no API client and has nothing to call. An enforcing one
acts only while its Lease elector says it holds the Lease, checked before every API call.
"""

from __future__ import annotations

import asyncio
import random
from collections import OrderedDict
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from pydantic import JsonValue

from connectors.kube.act.calls import ActuatorLimit, Calls, LeaseGate
from connectors.kube.act.eviction import Done, evict
from connectors.kube.act.node_actions import change_node
from models import (
    Action,
    ActionMode,
    ActionOutcome,
    ActionRequest,
    ActuatorSettings,
    EvictPod,
)
from models.actuation import ACTUATOR_EVIDENCE_KEY

__all__ = ["Actuator", "Executor"]

FINAL = frozenset({ActionOutcome.EXECUTED, ActionOutcome.GONE})
"""Outcomes after which an id is never acted on again. A blocked, refused or failed action may
be tried again under the same id (the budget may allow it later, the Lease may come back)."""


class Executor:
    """Carries out enforce requests against the API server, while ``gate`` holds."""

    def __init__(
        self,
        *,
        api_client: Any,
        gate: LeaseGate,
        settings: ActuatorSettings,
        identity: str,
        rng: random.Random | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.api_client = api_client
        self.calls = Calls(gate=gate, settings=settings, rng=rng or random.Random())
        self.identity = identity
        self.clock = clock

    async def execute(self, request: ActionRequest) -> Done:
        """The cluster's answer; raises an ``ActuatorLimit`` when a limit stopped it first."""
        self.calls.check()
        if isinstance(request, EvictPod):
            return await evict(self.calls, self.api_client, request)
        return await change_node(self.calls, self.api_client, request, now=self.clock)


class Actuator:
    """``act(request) -> Action``. Idempotent by action id: an id whose outcome was final is
    answered from memory with the same record, and a repeat while the first is in flight
    waits for it; neither calls the API again.

    Built without an executor (what ``guardrails.mode`` other than ``enforce`` gives) it has
    no API client at all, and records every request, enforce ones too, as proposed."""

    def __init__(
        self,
        *,
        settings: ActuatorSettings,
        executor: Executor | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.settings = settings
        self.executor = executor
        self.clock = clock
        self._done: OrderedDict[str, tuple[ActionRequest, Action]] = OrderedDict()
        self._running: dict[str, tuple[ActionRequest, asyncio.Future[Action]]] = {}

    def _record(
        self, request: ActionRequest, mode: ActionMode, done: Done, **extra: JsonValue
    ) -> Action:
        actuator: dict[str, JsonValue] = {"operation": request.op, "result": done.detail}
        if mode is ActionMode.ENFORCE:
            actuator |= {"http_status": done.status or None, "attempts": done.attempts}
            actuator |= {"changed": done.changed}
        actuator |= extra
        return Action(
            id=request.id,
            kind=request.kind,
            mode=mode,
            outcome=done.outcome,
            target_scope=request.target_scope,
            target=request.target,
            signal_fingerprint=request.signal_fingerprint,
            reason=request.reason,
            evidence={**request.evidence, ACTUATOR_EVIDENCE_KEY: actuator},
            created_at=self.clock(),
        )

    async def act(self, request: ActionRequest) -> Action:
        if self.executor is None or request.mode is ActionMode.DRY_RUN:
            why = "dry run: no API call" if self.executor is None else "dry run requested"
            done = Done(ActionOutcome.PROPOSED, why, changed=False)
            return self._record(request, ActionMode.DRY_RUN, done)
        seen = self._done.get(request.id) or self._running.get(request.id)
        if seen is not None:
            earlier, result = seen
            if earlier != request:
                why = "action id already used for another request"
                done = Done(ActionOutcome.REFUSED, why, changed=False)
                return self._record(request, ActionMode.ENFORCE, done)
            return result if isinstance(result, Action) else await asyncio.shield(result)
        future: asyncio.Future[Action] = asyncio.get_running_loop().create_future()
        self._running[request.id] = (request, future)
        try:
            action = await self._enforce(self.executor, request)
            future.set_result(action)
        except asyncio.CancelledError:
            future.cancel()
            raise
        except Exception as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: no "never retrieved" warning when nobody waits
            raise
        finally:
            del self._running[request.id]
        if action.outcome in FINAL:
            self._remember(request, action)
        return action

    async def _enforce(self, executor: Executor, request: ActionRequest) -> Action:
        try:
            done = await executor.execute(request)
        except ActuatorLimit as limit:
            done = Done(limit.outcome, limit.detail, limit.status, limit.attempts, changed=False)
        return self._record(request, ActionMode.ENFORCE, done, holder=executor.identity)

    def _remember(self, request: ActionRequest, action: Action) -> None:
        self._done[request.id] = (request, action)
        while len(self._done) > self.settings.remembered_ids:
            self._done.popitem(last=False)
