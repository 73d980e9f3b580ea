"""The scripted OOM incident from raw events through the embedded pipeline's operators: the
watcher's pod and node events, the NVML sampler's per-process readings (pods known by their
cgroup's uid) and the OOMKilled events, joined into profiles and analysed. One storm on the
shared card, with the aggressor the readings show; nothing for the unrelated OOMs."""

from __future__ import annotations

from models import GpufragSettings, Signal
from streams.pipeline import define_pipeline
from tests.streams.oom_incident import AGGRESSOR, VICTIMS, at, incident


def test_the_incident_from_raw_events_opens_one_storm_and_resolves_it() -> None:
    p = define_pipeline(GpufragSettings()).build()
    signals: list[Signal] = []
    for env in [*incident(), None]:
        when = at(600) if env is None else env.event_time
        # deferred work at the time it falls due, as both runners do (streams/instants.py)
        while (due := p.cluster.next_due()) is not None and due <= when:
            signals += p.cluster.advance(due)
        if env is not None:
            for update in p.join.apply(env):
                signals += p.cluster.apply(update)
        signals += p.cluster.advance(when)
    storms = [s for s in signals if s.kind.value == "oom_storm"]
    assert [(s.state, s.scope.value, s.scope_id) for s in storms] == [
        ("open", "gpu", "ts-0/0"),
        ("resolved", "gpu", "ts-0/0"),
    ]
    opened, resolved = storms
    assert opened.evidence["victims"] == VICTIMS[:3] and opened.opened_at == at(90)
    assert opened.evidence["aggressor"] == AGGRESSOR
    assert resolved.resolved_at == at(400)  # 300 s after the last OOM on the card, at 100 s
