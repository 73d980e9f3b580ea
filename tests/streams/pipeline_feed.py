"""One raw event through the embedded pipeline's operators, as both runners do it: deferred
work first at the times it falls due (``streams/instants.py``), then the join, then the cluster
operator, then event time moves to the event's."""

from __future__ import annotations

from models import Envelope, Signal
from streams.pipeline import Pipeline


def feed(p: Pipeline, env: Envelope) -> list[Signal]:
    out: list[Signal] = []
    while (due := p.cluster.next_due()) is not None and due <= env.event_time:
        out += p.cluster.advance(due)
    for update in p.join.apply(env):
        out += p.cluster.apply(update)
    out += p.cluster.advance(env.event_time)
    return out
