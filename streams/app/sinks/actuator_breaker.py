"""The circuit breaker where actions are carried out: the actuator's own failures open it.

The planning side's gate cannot see an eviction fail: in the distributed runner the actuator is
another process (`gpufrag actuate`), and in `watch --bus embedded` the outcome comes back from
the API server long after the instant that planned it. So the actuator counts its own failed
actions (outcome ``failed``: the API server refused or never answered, after the retries)
with the gate's own arithmetic (``Gate.outcome``: ``GPUFRAG_GUARDRAILS__BREAKER_FAILURES``
within ``WINDOW_S``), and while the breaker is open (``BREAKER_OPEN_S``) it carries out
nothing: every enforce request is answered ``refused``, with the breaker's reason, and the
planners' later requests go the same way until the cool-down ends. Its times are the wall
clock's: it counts answers of a live API server, not events.

``gpufrag_circuit_breaker_open`` is 1 while it is open; the chart's GpufragCircuitBreakerOpen
rule alerts on it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from models import Action, ActionMode, ActionOutcome, ActionRequest
from models.action_settings import GuardrailSettings
from models.actuation import ACTUATOR_EVIDENCE_KEY
from streams.guardrails.gate import Candidate, Gate
from streams.runner.fanout import RequestActuator

__all__ = ["BreakerGauge", "BreakingActuator"]

log = logging.getLogger(__name__)


class BreakingActuator:
    """``act(request) -> Action`` of the actuator it wraps, unless the breaker is open."""

    def __init__(
        self,
        actuator: RequestActuator,
        *,
        settings: GuardrailSettings,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.actuator = actuator
        self.gate = Gate(settings)
        self.clock = clock
        self.trips = 0

    def is_open(self) -> bool:
        now = self.clock()
        self.gate.ledger.forget_before(now)  # closes it once the cool-down has passed
        return self.gate.breaker_open(now)

    async def act(self, request: ActionRequest) -> Action:
        if request.mode is ActionMode.ENFORCE and self.is_open():
            return self._held(request)
        action = await self.actuator.act(request)
        if action.mode is ActionMode.ENFORCE and action.outcome is ActionOutcome.FAILED:
            was_open = self.is_open()
            now = self.clock()
            candidate = Candidate(action_id=request.id, kind=request.kind, at=now)
            self.gate.outcome(candidate, ok=False, at=now, signal_open=False)
            if not was_open and self.gate.breaker_open(now):
                self.trips += 1
                log.warning(
                    "circuit breaker open until %s: %s; enforce requests are refused meanwhile",
                    self.gate.ledger.breaker_until,
                    self.gate.ledger.breaker_why,
                )
        return action

    def _held(self, request: ActionRequest) -> Action:
        led = self.gate.ledger
        until = led.breaker_until.isoformat() if led.breaker_until is not None else "?"
        why = f"circuit breaker open until {until}: {led.breaker_why}"
        return Action(
            id=request.id,
            kind=request.kind,
            mode=ActionMode.ENFORCE,
            outcome=ActionOutcome.REFUSED,
            target_scope=request.target_scope,
            target=request.target,
            signal_fingerprint=request.signal_fingerprint,
            reason=request.reason,
            evidence={
                **request.evidence,
                ACTUATOR_EVIDENCE_KEY: {"operation": request.op, "result": why},
            },
            created_at=self.clock(),
        )


class BreakerGauge(Collector):
    """``gpufrag_circuit_breaker_open`` of a process that acts but plans nothing
    (`gpufrag actuate`): 1 while any breaker it was shown is open; and how often they opened."""

    def __init__(self) -> None:
        self.breakers: list[BreakingActuator] = []

    def watch(self, actuator: RequestActuator) -> None:
        """Count ``actuator``'s breaker (a dry-run actuator has none)."""
        if isinstance(actuator, BreakingActuator):
            self.breakers.append(actuator)

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        yield GaugeMetricFamily(
            "gpufrag_circuit_breaker_open",
            "1 while the circuit breaker holds enforcement back, else 0",
            value=1.0 if any(b.is_open() for b in self.breakers) else 0.0,
        )
        yield CounterMetricFamily(
            "gpufrag_circuit_breaker_trips",
            "Times the actuator's circuit breaker opened on failed actions",
            value=sum(b.trips for b in self.breakers),
        )
