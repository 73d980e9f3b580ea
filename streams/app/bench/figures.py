"""What a case measures: samples, their median, the same-run baseline, the ratio, the targets.

A figure's worth is its ratio to a baseline measured in the same run on the same input: the
absolute number moves with the machine and its load (2 shared cores here), the ratio much less.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any, Literal

Of = Literal["median", "ratio"]


@dataclass(frozen=True, slots=True)
class Goal:
    """``median <= bound`` (``at_most``) or ``>= bound``, on the median or on the ratio to the
    baseline."""

    bound: float
    at_most: bool = True
    of: Of = "median"

    def met(self, median: float, ratio: float | None) -> bool | None:
        value = median if self.of == "median" else ratio
        if value is None:
            return None
        return value <= self.bound if self.at_most else value >= self.bound

    def text(self, unit: str) -> str:
        sign = "<=" if self.at_most else ">="
        if self.of == "ratio":
            return f"{sign} {self.bound:g}x baseline"
        return f"{sign} {self.bound:g} {unit}"


@dataclass(frozen=True, slots=True)
class Samples:
    """The timed runs of one figure (warm-up runs are not in it)."""

    values: tuple[float, ...]

    def __post_init__(self) -> None:
        if not self.values:
            raise ValueError("a figure needs at least one run")

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    @property
    def low(self) -> float:
        return min(self.values)

    @property
    def high(self) -> float:
        return max(self.values)


@dataclass(frozen=True, slots=True, kw_only=True)
class Figure:
    """One row of the table and one object of ``--json``."""

    case: str
    name: str
    """What was measured, with its unit in the name (``help_s``, ``events_per_s``)."""
    unit: str
    samples: Samples | None
    """None: the figure was not run (``note`` says why)."""
    baseline: str | None = None
    baseline_samples: Samples | None = None
    targets: tuple[Goal, ...] = ()
    note: str = ""
    params: dict[str, Any] = field(default_factory=dict)
    """The input's size and settings (nodes, offered load, policy), printed with the figure."""

    @property
    def ratio(self) -> float | None:
        """Median over the baseline's median: above 1 is slower for a time, faster for a rate."""
        if self.samples is None or self.baseline_samples is None:
            return None
        base = self.baseline_samples.median
        return self.samples.median / base if base else None

    @property
    def met(self) -> bool | None:
        """All targets met; None when the figure has none or was not run."""
        if self.samples is None or not self.targets:
            return None
        verdicts = [t.met(self.samples.median, self.ratio) for t in self.targets]
        if any(v is None for v in verdicts):
            return None
        return all(verdicts)

    @property
    def target(self) -> str | None:
        return " and ".join(t.text(self.unit) for t in self.targets) or None

    def as_json(self) -> dict[str, Any]:
        s, b = self.samples, self.baseline_samples
        return {
            "case": self.case,
            "figure": self.name,
            "median": None if s is None else s.median,
            "min": None if s is None else s.low,
            "max": None if s is None else s.high,
            "runs": 0 if s is None else len(s.values),
            "unit": self.unit,
            "baseline": self.baseline,
            "baseline_median": None if b is None else b.median,
            "ratio": self.ratio,
            "target": self.target,
            "met": self.met,
            "params": self.params,
            "note": self.note,
        }


def not_run(case: str, name: str, unit: str, why: str, *, targets: tuple[Goal, ...] = ()) -> Figure:
    """A figure the run could not measure (no broker given): printed and written as such, never
    faked and never an error."""
    return Figure(
        case=case, name=name, unit=unit, samples=None, targets=targets, note=f"not run: {why}"
    )
