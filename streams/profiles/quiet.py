"""A card's quiet run: how long its engines have stayed below a low activity, with the peaks
of memory and activity over that time, from its readings alone.

A run starts at the first reading below ``activity_pct`` and goes on while readings keep
coming below it; a reading at or above it, one without an activity figure, or a gap of more
than ``gap_s`` between readings ends it (a gap is not idleness: the sampler may have been
down while the card worked). The run is ``held`` once it spans ``window_s``, decided at a
reading, so a card whose readings stopped is never found idle by the passing of time. The
profile changes when a run starts, ends, is held, or its peaks grow; not at every reading.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from models import GpuSample

__all__ = ["QuietRules", "QuietRun", "quiet_step"]


@dataclass(frozen=True, slots=True, kw_only=True)
class QuietRules:
    window_s: float
    activity_pct: float
    gap_s: float


@dataclass(frozen=True, slots=True)
class QuietRun:
    since: datetime
    last_at: datetime
    peak_mib: float | None
    peak_activity_pct: float
    held: bool = False

    def to_json(self) -> list[object]:
        return [
            self.since.isoformat(),
            self.last_at.isoformat(),
            self.peak_mib,
            self.peak_activity_pct,
            self.held,
        ]

    @classmethod
    def from_json(cls, raw: list[object] | None) -> QuietRun | None:
        if not raw:
            return None
        since, last_at, peak, activity, held = raw
        return cls(
            datetime.fromisoformat(str(since)),
            datetime.fromisoformat(str(last_at)),
            None if peak is None else float(str(peak)),
            float(str(activity)),
            bool(held),
        )


def activity_pct(sample: GpuSample) -> float | None:
    """The engines' activity in percent: DCGM's graphics-engine activity where the exporter
    has it (time any engine was busy), else the driver's utilization (time a kernel ran)."""
    if sample.engine_active is not None:
        return sample.engine_active * 100.0
    return sample.utilization_pct


def quiet_step(
    prev: QuietRun | None, sample: GpuSample, at: datetime, *, rules: QuietRules
) -> QuietRun | None:
    active = activity_pct(sample)
    if active is None or active >= rules.activity_pct:
        return None
    mib = sample.memory_used_mib
    if prev is None or (at - prev.last_at).total_seconds() > rules.gap_s or at < prev.last_at:
        return QuietRun(at, at, mib, active, held=rules.window_s <= 0)
    # one reading without a memory figure leaves the run's peak unknown: a peak over the
    # known readings only could call a card small that filled up in between
    peak = None if mib is None or prev.peak_mib is None else max(mib, prev.peak_mib)
    return QuietRun(
        prev.since,
        at,
        peak,
        max(active, prev.peak_activity_pct),
        held=(at - prev.since).total_seconds() >= rules.window_s,
    )
