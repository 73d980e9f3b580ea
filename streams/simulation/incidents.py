"""Scripted OOM storms added to a replay's event stream (``gpufrag replay --inject-oom-storms``),
so the storm detector is checked end to end on a known answer.

An incident is a time-sliced card's worst minute: an aggressor and 3-6 victims appear on one
card; NVML's per-process readings show the aggressor's memory growing; then every victim is
OOM-killed within a minute. Each incident has a namespace of its own, so the namespace scope
(10 OOMs by default) never adds up two incidents. Around the incidents, background OOMs: lone
pods (namespace ``oom-background``) killed once each, every one far enough from any other OOM
that no card, node or namespace reaches its threshold. Times come from the seed alone; places
from the seed and the stream: a card the stream shows with room at that instant.

The simulated scheduler is not told of the injected pods, so the trace's own placements, and
with them its fragmentation and FGD figures, are those of the same replay without them. The
pipeline does see them, each holding 100 milli of its card for the few minutes it lives; a
trace pod the simulator puts on that card meanwhile overcommits it in the pipeline's view,
where the card layout counts the surplus as unplaced (``streams/profiles/card_layout.py``).
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np

from models import (
    MILLI_PER_GPU,
    Envelope,
    GpuSample,
    GpuSampleEvent,
    NodeEvent,
    Pod,
    PodEvent,
    PodPhase,
    ResourceRequest,
    SchedulerEvent,
    SchedulingEvent,
    Scope,
)
from models.settings import OomStormSettings
from streams.simulation.sim_actuator import Barrier

SOURCE = "inject:oom-storms"
"""The injected events' source, so the store tells them from the trace's."""
BACKGROUND_NAMESPACE = "oom-background"
RNG_SALT = 13
"""Mixed into the seed (issue 13): the injection draws its own numbers, and the simulator's
draws, hence the trace's placements, are the same with or without it."""
VICTIMS = (3, 6)
"""Fewest and most victims of one incident: 3 is the card threshold, 6 leaves the namespace
threshold (10) out of reach of one incident."""
BACKGROUND_PER_STORM = 3
POD_MILLI = 100
"""Each injected pod's share of its card: an incident's 7 pods at most take 700 of 1000."""
POD_CPU_MILLI = 500
POD_MEMORY_MIB = 1024
SAMPLE_EVERY_S = 10.0
SAMPLES = 5
"""Readings 10-50 s after the pods appear; the first kill comes 5 s after the last one, so
all five fall in the 60 s card window before it, where the detector measures growth."""
FIRST_KILL_S = SAMPLES * SAMPLE_EVERY_S + 5.0
KILL_SPREAD_S = 45.0
"""The victims die within 45 s of the first kill: inside the minute, and 15 s inside the
card window (60 s), so all of them count in one window."""
HOLD_S = 30.0
"""The pods are deleted this long after the last kill."""
BACKGROUND_LEAD_S = 20.0
"""A background pod lives 20 s before its kill."""
GUARD_MARGIN_S = 60.0
"""Added to the quiet period between any two injected items (300 + 60 s by default)."""
VICTIM_BASE_MIB = 1024.0
AGGRESSOR_BASE_MIB = 2048.0
AGGRESSOR_GROWTH_MIB = 3072.0
"""Per reading: 2 GiB to 17 GiB over the five readings, a 16 GB card's worth."""


@dataclass(frozen=True, slots=True)
class Planned:
    """One item of the plan: an incident or a background OOM."""

    storm: bool
    index: int
    """Numbered from 1 among the incidents, and among the background OOMs."""
    at: datetime
    """When its pods appear."""
    kills: tuple[float, ...]
    """Seconds after ``at`` of each kill, in order."""
    pick: float
    """In [0, 1): which card, among those with room when it starts."""


@dataclass(frozen=True, slots=True)
class InjectedStorm:
    """An incident as it went into the stream."""

    namespace: str
    node: str
    gpu: int
    aggressor: str
    victims: tuple[str, ...]
    appeared: datetime
    last_kill: datetime

    def scopes(self) -> frozenset[tuple[Scope, str]]:
        """Where the detector may see it: its card, its node, its namespace."""
        return frozenset(
            {
                (Scope.GPU, f"{self.node}/{self.gpu}"),
                (Scope.NODE, self.node),
                (Scope.NAMESPACE, self.namespace),
            }
        )


def guard_s(settings: OomStormSettings) -> float:
    """Event-time seconds between injected items: a storm has resolved and every window has
    emptied before the next item's first OOM."""
    longest = max(settings.card_window_s, settings.node_window_s, settings.namespace_window_s)
    return max(settings.quiet_s, longest) + GUARD_MARGIN_S


def plan(
    *, storms: int, seed: int, start: datetime, end: datetime, settings: OomStormSettings
) -> list[Planned]:
    """``storms`` incidents and their background OOMs at seeded times in ``[start, end]``,
    in random order, each followed by a guard; past ``end`` when they do not fit in it.
    No background OOM where a threshold is 1: a single OOM is a storm there."""
    rng = np.random.default_rng([RNG_SALT, seed])
    lowest = min(settings.card_events, settings.node_events, settings.namespace_events)
    background = BACKGROUND_PER_STORM * storms if lowest >= 2 else 0
    spread = min(KILL_SPREAD_S, 0.75 * settings.card_window_s)
    kinds = np.zeros(storms + background, dtype=bool)
    kinds[:storms] = True
    kinds = kinds[rng.permutation(len(kinds))]
    drafts: list[tuple[tuple[float, ...], float]] = []
    for is_storm in kinds:
        if is_storm:
            n = int(rng.integers(VICTIMS[0], VICTIMS[1] + 1))
            rest = np.sort(rng.uniform(0.0, spread, n - 1))
            # tenths of a second, as readable as the trace's whole seconds
            kills = (FIRST_KILL_S, *(FIRST_KILL_S + round(float(x), 1) for x in rest))
        else:
            kills = (BACKGROUND_LEAD_S,)
        drafts.append((kills, float(rng.random())))
    guard = guard_s(settings)
    # an item takes its kills, the hold before its pods go, and the guard after them, in whole
    # seconds so that starts rounded down to the second keep the items that far apart
    taken = [math.ceil(kills[-1] + HOLD_S + guard) for kills, _ in drafts]
    slack = max(0.0, (end - start).total_seconds() - sum(taken))
    offsets = np.sort(rng.uniform(0.0, slack, len(drafts)))
    out: list[Planned] = []
    before = 0.0
    counters = {True: itertools.count(1), False: itertools.count(1)}
    for is_storm, (kills, pick), offset, length in zip(kinds, drafts, offsets, taken, strict=True):
        k = next(counters[bool(is_storm)])
        at = start + timedelta(seconds=math.floor(float(offset) + before))
        out.append(Planned(bool(is_storm), k, at, kills, pick))
        before += length
    return out


class _Cards:
    """Each card's milli held by the pods the stream has bound so far."""

    def __init__(self) -> None:
        self.count: dict[str, int] = {}
        self.used: dict[tuple[str, int], int] = {}
        self.held: dict[str, tuple[tuple[str, int], ...]] = {}
        self.milli: dict[str, int] = {}

    def see(self, env: Envelope) -> None:
        p = env.payload
        if isinstance(p, NodeEvent):
            if p.change == "delete":
                self.count.pop(p.node.name, None)
            else:
                self.count[p.node.name] = p.node.gpu_count
            return
        if not isinstance(p, PodEvent):
            return
        key, pod = p.pod.key, p.pod
        milli = self.milli.pop(key, 0)
        for card in self.held.pop(key, ()):
            self.used[card] -= milli
        if p.change == "delete" or pod.node is None or not pod.gpu_indices:
            return
        if pod.phase in (PodPhase.SUCCEEDED, PodPhase.FAILED):
            return
        cards = tuple((pod.node, i) for i in pod.gpu_indices)
        self.held[key] = cards
        self.milli[key] = pod.requests.gpu_milli
        for card in cards:
            self.used[card] = self.used.get(card, 0) + pod.requests.gpu_milli

    def choose(self, need: int, pick: float) -> tuple[str, int] | None:
        """A card with ``need`` milli free, by ``pick``; the freest ones when none has it."""
        cards = [(n, i) for n, count in self.count.items() for i in range(count)]
        if not cards:
            return None
        free = [MILLI_PER_GPU - self.used.get(c, 0) for c in cards]
        fits = [c for c, f in zip(cards, free, strict=True) if f >= need]
        if not fits:
            fits = [c for c, f in zip(cards, free, strict=True) if f == max(free)]
        return fits[min(int(pick * len(fits)), len(fits) - 1)]


class NoCardError(ValueError):
    """An injected item found no GPU card in the stream to go on."""


class StormInjector:
    """Merges the plan's events into a stream, in event-time order; ``storms`` and
    ``background`` say what went in (all of the plan, unless the stream was stopped)."""

    def __init__(self, items: Sequence[Planned], *, source: str = SOURCE) -> None:
        self.items = sorted(items, key=lambda p: (p.at, not p.storm, p.index))
        self.source = source
        self.storms: list[InjectedStorm] = []
        self.background = 0
        self._cards = _Cards()
        self._queued: list[tuple[datetime, int, Envelope]] = []
        self._order = itertools.count()

    def wrap(self, events: Iterable[Envelope | Barrier]) -> Iterator[Envelope | Barrier]:
        todo = iter(self.items)
        upcoming = next(todo, None)
        for env in events:
            if isinstance(env, Barrier):  # the pipeline's turn: nothing of ours is due for it
                yield env
                continue
            while upcoming is not None and upcoming.at < env.event_time:
                yield from self._due(before=upcoming.at)
                self._start(upcoming)
                upcoming = next(todo, None)
            yield from self._due(before=env.event_time)
            self._cards.see(env)
            yield env
        while upcoming is not None:
            yield from self._due(before=upcoming.at)
            self._start(upcoming)
            upcoming = next(todo, None)
        yield from self._due(before=None)

    def _due(self, *, before: datetime | None) -> Iterator[Envelope]:
        """Queued events earlier than ``before``: a deletion frees its card before the next
        item chooses one, and a trace event of the same instant goes first."""
        while self._queued and (before is None or self._queued[0][0] < before):
            env = heapq.heappop(self._queued)[2]
            self._cards.see(env)
            yield env

    def _start(self, item: Planned) -> None:
        pods = 1 + len(item.kills) if item.storm else 1
        card = self._cards.choose(pods * POD_MILLI, item.pick)
        if card is None:
            raise NoCardError(f"no GPU card in the stream at {item.at} to inject an OOM on")
        events = self._storm(item, card) if item.storm else self._lone(item, card)
        for env in events:
            heapq.heappush(self._queued, (env.event_time, next(self._order), env))

    def _wrap(self, payload: PodEvent | GpuSampleEvent | SchedulingEvent, at: datetime) -> Envelope:
        return Envelope.wrap(payload, event_time=at, source=self.source)

    def _storm(self, item: Planned, card: tuple[str, int]) -> list[Envelope]:
        node, gpu = card
        ns = f"oom-storm-{item.index}"
        names = ["aggressor", *(f"victim-{j}" for j in range(1, len(item.kills) + 1))]
        pods = [_pod(ns, name, card, item.at) for name in names]
        out = [self._wrap(PodEvent(change="upsert", pod=p), item.at) for p in pods]
        for k in range(1, SAMPLES + 1):
            use = {p.key: VICTIM_BASE_MIB + 128.0 * j for j, p in enumerate(pods)}
            use[pods[0].key] = AGGRESSOR_BASE_MIB + AGGRESSOR_GROWTH_MIB * (k - 1)
            sample = GpuSample(node=node, gpu_index=gpu, pod_memory_mib=use)
            out.append(
                self._wrap(GpuSampleEvent(sample=sample), _after(item.at, SAMPLE_EVERY_S * k))
            )
        for victim, s in zip(pods[1:], item.kills, strict=True):
            out.append(self._wrap(_oom(victim), _after(item.at, s)))
        gone = _after(item.at, item.kills[-1] + HOLD_S)
        out += [self._wrap(PodEvent(change="delete", pod=p), gone) for p in pods]
        # the processes are gone too: without this reading the card would name them for ever
        empty = GpuSample(node=node, gpu_index=gpu, pod_memory_mib={})
        out.append(self._wrap(GpuSampleEvent(sample=empty), gone))
        self.storms.append(
            InjectedStorm(
                namespace=ns,
                node=node,
                gpu=gpu,
                aggressor=pods[0].key,
                victims=tuple(p.key for p in pods[1:]),
                appeared=item.at,
                last_kill=_after(item.at, item.kills[-1]),
            )
        )
        return out

    def _lone(self, item: Planned, card: tuple[str, int]) -> list[Envelope]:
        pod = _pod(BACKGROUND_NAMESPACE, f"lone-{item.index}", card, item.at)
        self.background += 1
        return [
            self._wrap(PodEvent(change="upsert", pod=pod), item.at),
            self._wrap(_oom(pod), _after(item.at, item.kills[0])),
            self._wrap(PodEvent(change="delete", pod=pod), _after(item.at, item.kills[0] + HOLD_S)),
        ]


def _after(at: datetime, seconds: float) -> datetime:
    return at + timedelta(seconds=seconds)


def _pod(namespace: str, name: str, card: tuple[str, int], at: datetime) -> Pod:
    node, gpu = card
    return Pod(
        namespace=namespace,
        name=name,
        uid=f"{namespace}.{name}",
        phase=PodPhase.RUNNING,
        node=node,
        gpu_indices=(gpu,),
        requests=ResourceRequest(
            cpu_milli=POD_CPU_MILLI, memory_mib=POD_MEMORY_MIB, gpu_count=1, gpu_milli=POD_MILLI
        ),
        created_at=at,
    )


def _oom(pod: Pod) -> SchedulingEvent:
    event = SchedulerEvent(
        reason="OOMKilled",
        message="container main was OOMKilled (exit code 137)",
        pod_namespace=pod.namespace,
        pod_name=pod.name,
        pod_uid=pod.uid,
        node=pod.node,
    )
    return SchedulingEvent(event=event)
