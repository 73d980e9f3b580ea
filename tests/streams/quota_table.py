"""The scenario-table runner of the quota tests: the profile join and the cluster operator in a
plain loop, one event-time instant per step, with a restart from the snapshot after any step
(``check``), shared by the queue view's and the quota refusals' tables."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from models import DetectorSettings, Envelope, Signal
from models.settings import UnplaceablePendingSettings
from streams.cluster_analysis import ClusterAnalysis
from streams.instants import Instants
from streams.operator import StateChanges
from streams.profiles.operators import ProfileJoin, ordered_deltas
from tests.kube_fake.objects import T0
from tests.streams.quota_scenarios import Step

__all__ = ["SETTINGS", "Run", "check", "play"]

SETTINGS = DetectorSettings(unplaceable_pending=UnplaceablePendingSettings(evaluate_every_s=0))


@dataclass(slots=True)
class Run:
    """The join and the cluster operator in a plain loop, one instant per step, the cluster
    operator's snapshot entries kept as a Faust table would keep them."""

    join: ProfileJoin = field(default_factory=ProfileJoin)
    analysis: ClusterAnalysis = field(default_factory=lambda: _analysis({}))
    instants: Instants[Any, Signal] = field(init=False)
    table: dict[str, bytes] = field(default_factory=dict)
    seq: int = 0

    def __post_init__(self) -> None:
        self.instants = Instants(self.analysis)

    def step(self, at: datetime, events: list[Envelope]) -> list[Signal]:
        for env in events:
            env = env.model_copy(update={"event_time": at, "seq": self.seq})
            self.seq += 1
            for key, u in ordered_deltas(env, self.join.apply(env)):
                self.instants.add(key, u)
        out = [o for o in self.instants.release(at) if isinstance(o, Signal)]
        _keep(self.table, self.analysis.snapshot())
        return out

    def restart(self) -> None:
        """A new cluster operator from the table, as a restarted worker rebuilds its view."""
        watermark = self.instants.watermark
        self.analysis = _analysis(self.table)
        self.instants = Instants(self.analysis)
        self.instants.watermark = watermark


def _analysis(entries: dict[str, bytes]) -> ClusterAnalysis:
    a = ClusterAnalysis(detectors=SETTINGS)
    a.restore(entries)  # from here on it records its changes, as the worker's does
    return a


def _keep(table: dict[str, bytes], changes: StateChanges) -> None:
    for k, v in changes.items():
        if v is None:
            table.pop(k, None)
        else:
            table[k] = v


def play(steps: list[Step], *, restart_after: int | None = None) -> list[list[Signal]]:
    run = Run()
    out = []
    for n, s in enumerate(steps):
        out.append(run.step(T0 + timedelta(seconds=10 * n), s.events))
        if n == restart_after:
            run.restart()
    return out


def check(steps: list[Step]) -> list[list[Signal]]:
    got = play(steps)
    for n, (s, signals) in enumerate(zip(steps, got, strict=True)):
        opened = {(x.kind, x.scope_id) for x in signals if x.state == "open"}
        resolved = {(x.kind, x.scope_id) for x in signals if x.state == "resolved"}
        assert (opened, resolved) == (s.opens, s.resolves), f"step {n}"
    for k in range(len(steps) - 1):
        assert play(steps, restart_after=k)[k + 1 :] == got[k + 1 :], f"restart after {k}"
    return got
