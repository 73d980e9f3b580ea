"""The fields of one figure in `gpufrag bench --json`, as docs/performance.md lists them."""

from __future__ import annotations

FIGURE_KEYS = {
    "case",
    "figure",
    "median",
    "min",
    "max",
    "runs",
    "unit",
    "baseline",
    "baseline_median",
    "ratio",
    "target",
    "met",
    "params",
    "note",
}
