"""Scripted OOM storms injected into a replay's stream, through the embedded runner: every
incident found once, nothing else opened, the background OOMs alone below every threshold,
and the trace's own events untouched."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest

from models import GpufragSettings, PodEvent, Scope
from models.settings import OomStormSettings
from streams.simulation.cluster import TraceMode
from streams.simulation.incidents import (
    BACKGROUND_PER_STORM,
    HOLD_S,
    SOURCE,
    VICTIMS,
    StormInjector,
    guard_s,
    plan,
)
from tests.streams.injection_helpers import reduced_trace, run, simulated

STORMS = 6
T0 = datetime(2023, 7, 1, tzinfo=UTC)


@pytest.mark.parametrize("mode", [TraceMode.TIMELINE, TraceMode.FGD])
@pytest.mark.parametrize("seed", [0, 7, 42, 2**40 + 3])
def test_every_injected_storm_is_found_and_nothing_else(mode: TraceMode, seed: int) -> None:
    sim = simulated(mode, seed, STORMS)
    events = list(sim.events())
    out = run(events, sim.pods)
    assert sim.injector is not None
    counts = out.tally.counts(sim.injector.storms)
    assert (counts.injected, counts.found, counts.false_positive) == (STORMS, STORMS, 0)
    assert sim.injector.background == BACKGROUND_PER_STORM * STORMS
    # each victim's kill and each background kill counted once by the join
    victims = sum(len(s.victims) for s in sim.injector.storms)
    assert sum(out.oom_counts.values()) == victims + sim.injector.background
    cards = [s for s in out.storms if s.state == "open" and s.scope is Scope.GPU]
    assert len(cards) == STORMS  # one card storm per incident, even on a card used twice
    quiet = timedelta(seconds=OomStormSettings().quiet_s)
    resolved = {(s.fingerprint, s.resolved_at) for s in out.storms if s.state == "resolved"}
    for signal in cards:
        (storm,) = [
            s
            for s in sim.injector.storms
            if f"{s.node}/{s.gpu}" == signal.scope_id
            and s.appeared <= signal.opened_at <= s.last_kill
        ]
        assert signal.evidence["aggressor"] == storm.aggressor
        assert set(signal.evidence["victims"]) <= set(storm.victims)  # type: ignore[arg-type]
        # resolved a quiet period after the last kill, where the stream goes on that long
        if storm.last_kill + quiet <= events[-1].event_time:
            assert (signal.fingerprint, storm.last_kill + quiet) in resolved


def test_background_ooms_alone_open_no_storm() -> None:
    settings = OomStormSettings()
    _, pods = reduced_trace()
    sim = simulated(TraceMode.TIMELINE, 3, 0)
    items = plan(storms=STORMS, seed=3, start=sim.start, end=sim.end(), settings=settings)
    background = [p for p in items if not p.storm]
    injector = StormInjector(background)
    out = run(list(injector.wrap(sim.events())), pods)
    assert injector.background == len(background) == BACKGROUND_PER_STORM * STORMS
    assert len(out.oom_counts) == len(background)  # every kill reached the join...
    assert out.storms == []  # ...and none made a storm
    counts = out.tally.counts(injector.storms)
    assert (counts.injected, counts.found, counts.false_positive) == (0, 0, 0)


def test_the_trace_events_are_those_of_a_replay_without_injection() -> None:
    plain = [e.id for e in simulated(TraceMode.FGD, 5, 0).events()]
    injected = list(simulated(TraceMode.FGD, 5, STORMS).events())
    assert [e.id for e in injected if e.source != SOURCE] == plain
    times = [e.event_time for e in injected]
    assert times == sorted(times)
    again = [e.id for e in simulated(TraceMode.FGD, 5, STORMS).events()]
    assert again == [e.id for e in injected]  # the seed decides everything


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_plan_keeps_items_apart_and_incidents_in_shape(seed: int) -> None:
    settings = GpufragSettings().detectors.oom_storm
    items = plan(storms=STORMS, seed=seed, start=T0, end=T0 + timedelta(days=1), settings=settings)
    assert sum(p.storm for p in items) == STORMS
    assert all(p.at >= T0 for p in items)
    for p in (p for p in items if p.storm):
        assert VICTIMS[0] <= len(p.kills) <= VICTIMS[1]
        assert p.kills[-1] - p.kills[0] < settings.card_window_s
    for a, b in itertools.pairwise(items):
        assert b.at >= a.at + timedelta(seconds=a.kills[-1] + HOLD_S + guard_s(settings))


def test_too_short_a_span_runs_past_its_end_and_a_threshold_of_one_drops_the_background() -> None:
    settings = OomStormSettings(node_events=1)
    items = plan(storms=2, seed=0, start=T0, end=T0 + timedelta(seconds=10), settings=settings)
    assert [p.storm for p in items] == [True, True]
    assert items[1].at > T0 + timedelta(seconds=guard_s(settings))


def test_injected_pods_go_on_a_card_with_room() -> None:
    sim = simulated(TraceMode.TIMELINE, 11, STORMS)
    held: dict[tuple[str, int], dict[str, int]] = {}
    for env in sim.events():
        p = env.payload
        if isinstance(p, PodEvent):
            for card in held.values():
                card.pop(p.pod.key, None)
            if p.change == "upsert" and p.pod.node is not None:
                for i in p.pod.gpu_indices:
                    held.setdefault((p.pod.node, i), {})[p.pod.key] = p.pod.requests.gpu_milli
            if env.source == SOURCE and p.change == "upsert":
                assert p.pod.node is not None
                assert sum(held[(p.pod.node, p.pod.gpu_indices[0])].values()) <= 1000
