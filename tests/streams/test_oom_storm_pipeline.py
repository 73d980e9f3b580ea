"""The scripted OOM incident from raw events through the embedded pipeline's operators: the
watcher's pod and node events, the NVML sampler's per-process readings (pods known by their
cgroup's uid) and the OOMKilled events, joined into profiles and analysed. One storm on the
shared card, with the aggressor the readings show; nothing for the unrelated OOMs."""

from __future__ import annotations

from models import GpufragSettings, Signal
from streams.pipeline import define_pipeline
from tests.streams.oom_incident import AGGRESSOR, VICTIMS, at, incident
from tests.streams.pipeline_feed import feed


def test_the_incident_from_raw_events_opens_one_storm_and_resolves_it() -> None:
    p = define_pipeline(GpufragSettings()).build()
    signals: list[Signal] = []
    for env in incident():
        signals += feed(p, env)
    # then event time alone moves on to 600 s: the storm's quiet period falls due
    while (due := p.cluster.next_due()) is not None and due <= at(600):
        signals += p.cluster.advance(due)
    signals += p.cluster.advance(at(600))
    storms = [s for s in signals if s.kind == "oom_storm"]
    assert [(s.state, s.scope.value, s.scope_id) for s in storms] == [
        ("open", "gpu", "ts-0/0"),
        ("resolved", "gpu", "ts-0/0"),
    ]
    opened, resolved = storms
    assert opened.evidence["victims"] == VICTIMS[:3] and opened.opened_at == at(90)
    assert opened.evidence["aggressor"] == AGGRESSOR
    assert resolved.resolved_at == at(400)  # 300 s after the last OOM on the card, at 100 s
