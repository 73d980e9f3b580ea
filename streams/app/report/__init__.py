"""The static HTML report of one run: data in, one self-contained page out.

The page has no external resources so that it can be attached to a ticket, mailed, or opened
from an air-gapped bastion and still show every figure. Loading the data from the database is
someone else's job; this package only sees the plain :class:`ReportData` snapshot, which keeps
rendering pure, fast and testable without a store.
"""

from __future__ import annotations

from streams.app.report.data import FragPoint, ReportData, RunInfo, SignalRow, StrandedNode
from streams.app.report.render import render_report, write_report

__all__ = [
    "FragPoint",
    "ReportData",
    "RunInfo",
    "SignalRow",
    "StrandedNode",
    "render_report",
    "write_report",
]
