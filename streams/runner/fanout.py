"""The embedded runner's one output, fanned out to the sinks attached to it.

Each sink reads the channels it wants from a typed ``Emission`` (the store all of them, alert
sinks the signals, a replay's storm tally the signals, the closed loop the events); the
actuator, when there is one, turns the instant's requests into the audit records of what it
did before any sink sees them, so every sink sees the same outcome."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from models import Action
from models.actuation import ActionRequest
from streams.runner.embedded import Emission, Failure

__all__ = ["Fanout", "OutputSink", "RequestActuator"]


class OutputSink(Protocol):
    """One consumer of a run's outputs."""

    async def take(self, item: Emission) -> None: ...

    async def dead_letter(self, failure: Failure) -> None:
        """An event a stage failed on, with the reason (a sink that keeps no history passes)."""
        ...


class RequestActuator(Protocol):
    async def act(self, request: ActionRequest) -> Action:
        """Carry out one request; the record says what was done (or refused, and why)."""
        ...


class Fanout:
    def __init__(
        self, sinks: Sequence[OutputSink], *, actuator: RequestActuator | None = None
    ) -> None:
        """``actuator`` None: requests stay requests, and no sink stores them (the audit
        records already say what would have been done)."""
        self.sinks = list(sinks)
        self.actuator = actuator

    async def emit(self, item: Emission) -> None:
        if self.actuator is not None:
            for instant in item.instants:
                done = [await self.actuator.act(r) for r in instant.requests]
                instant.actions += done
                instant.requests = []
        for sink in self.sinks:
            await sink.take(item)

    async def dead_letter(self, failure: Failure) -> None:
        for sink in self.sinks:
            await sink.dead_letter(failure)
