"""The static HTML report of one run: data in, one self-contained page out.

The page has no external resources so that it can be attached to a ticket, mailed, or opened
from an air-gapped bastion and still show every figure. Loading the data from the database is
someone else's job; this package only sees the plain :class:`ReportData` snapshot, which keeps
rendering pure, fast and testable without a store.
"""

from __future__ import annotations

from typing import Any

from streams.app.report.data import FragPoint, ReportData, RunInfo, SignalRow, StrandedNode

__all__ = [
    "FragPoint",
    "ReportData",
    "RunInfo",
    "SignalRow",
    "StrandedNode",
    "render_report",
    "write_report",
]


def __getattr__(name: str) -> Any:
    # The renderer pulls in matplotlib (a third of a second); every gpufrag command imports
    # this package through the data classes, and only `report` needs the renderer.
    if name in ("render_report", "write_report"):
        from streams.app.report import render

        return getattr(render, name)
    raise AttributeError(name)
