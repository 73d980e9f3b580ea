"""The quota scenarios as one event stream for the worker tests."""

from __future__ import annotations

from datetime import timedelta

from models import Envelope
from tests.kube_fake.objects import T0
from tests.streams.quota_scenarios import Step, borrower_steps, exhausted_steps, refusal_steps


def events() -> list[Envelope]:
    """The borrower, the exhausted namespace and the refused Job, one step every 10 s, in
    publishing order."""
    steps: list[Step] = [*borrower_steps(), *exhausted_steps(), *refusal_steps()]
    # wrapped again: an event's id is a function of its time too
    return [
        Envelope.wrap(env.payload, event_time=T0 + timedelta(seconds=10 * n), source=env.source)
        for n, step in enumerate(steps)
        for env in step.events
    ]
