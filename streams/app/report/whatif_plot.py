"""The report's what-if figure: the run's allocation and the same pods under another policy,
against event time."""

from __future__ import annotations

import matplotlib.dates as mdates

from streams.app.report.data import WhatIfCurves
from streams.app.report.plots import (
    _ALLOC,
    _AMOUNT,
    FONT_SIZE,
    TITLE_SIZE,
    _date_num,
    _figure,
    _png,
    no_data_png,
)

__all__ = ["whatif_plot"]


def whatif_plot(w: WhatIfCurves) -> bytes:
    title = f"GPU allocation: recorded and under {w.policy}"
    if not w.recorded and not w.whatif:
        return no_data_png(title)
    fig = _figure(4.6)
    ax = fig.add_subplot()
    for points, color, label in (
        (w.recorded, _ALLOC, "recorded"),
        (w.whatif, _AMOUNT, f"what-if under {w.policy}"),
    ):
        if points:
            ax.plot(
                [_date_num(t) for t, _ in points],
                [a for _, a in points],
                color=color,
                linewidth=2.0,
                label=label,
            )
    ax.set_ylim(0.0, 105.0)
    ax.set_ylabel("% of cluster GPUs allocated", fontsize=FONT_SIZE)
    locator = mdates.AutoDateLocator()  # type: ignore[no-untyped-call]
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))  # type: ignore[no-untyped-call]
    ax.set_xlabel("event time (UTC)", fontsize=FONT_SIZE)
    ax.tick_params(labelsize=FONT_SIZE)
    ax.grid(True, color="#dddddd", linewidth=0.6)
    ax.set_title(title, fontsize=TITLE_SIZE)
    ax.legend(loc="lower right", fontsize=FONT_SIZE - 1)
    return _png(fig)
