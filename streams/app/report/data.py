"""What the report shows, as plain immutable values.

The loader (database side) and the renderer meet here and nowhere else: the renderer never
queries, and the loader never formats. Frozen, slotted, keyword-only dataclasses keep the
snapshot cheap, impossible to mutate half-way through rendering, and explicit at the call site
(a dozen positional floats would be easy to swap silently).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class RunInfo:
    """Which run the report describes, and its headline figures.

    ``summary`` is whatever the run recorded (final fragmentation, pods bound/failed, ...); the
    renderer shows every key so new figures appear without a renderer change. It is left out of
    hashing because a mapping is usually a ``dict``.
    """

    run_id: str
    source: str
    mode: str
    policy: str
    seed: int
    status: str
    started_at: datetime
    summary: Mapping[str, object] = field(hash=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class FragPoint:
    """One sample of the fragmentation curve.

    ``x`` is arrived GPU demand (% of capacity) in a protocol run, or POSIX seconds in a timeline
    run (see :attr:`ReportData.x_is_time`). Amount and allocation are % of the cluster's GPUs;
    ratio is % of the idle GPUs, so the two fragmentation figures have different denominators.
    """

    x: float
    frag_amount_pct: float
    frag_ratio_pct: float
    alloc_pct: float


@dataclass(frozen=True, slots=True, kw_only=True)
class StrandedNode:
    """A node whose idle GPUs cannot be used, and the resources it is missing to use them."""

    node: str
    pool: str | None
    idle_gpus: float
    lacks: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class SignalRow:
    """One detection; ``resolved_at`` is ``None`` while it is still open."""

    opened_at: datetime
    resolved_at: datetime | None
    kind: str
    scope_id: str
    summary: str


@dataclass(frozen=True, slots=True, kw_only=True)
class WhatIfCurves:
    """The run's allocation beside the same pods placed again under ``policy``
    (`gpufrag whatif`): (POSIX seconds, % of cluster GPUs allocated) each."""

    policy: str
    recorded: tuple[tuple[float, float], ...]
    whatif: tuple[tuple[float, float], ...]
    recorded_alloc_pct: float | None
    whatif_alloc_pct: float
    failed_recorded: int
    failed_whatif: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ReportData:
    """Everything one report page shows, already aggregated by the loader.

    - ``x_label``: what ``FragPoint.x`` means, e.g. ``"arrived GPU demand (% of capacity)"`` or
      ``"time"``; ``x_is_time`` says x values are POSIX seconds (UTC).
    - ``pending_by_reason``: (blocking reason, unplaceable pending pods).
    - ``stranded_nodes``: the top nodes by idle GPUs that cannot be used.
    - ``signal_counts``: (kind, state, count).
    """

    run: RunInfo
    x_label: str
    x_is_time: bool
    frag_series: tuple[FragPoint, ...]
    pending_by_reason: tuple[tuple[str, int], ...]
    stranded_nodes: tuple[StrandedNode, ...]
    signal_counts: tuple[tuple[str, str, int], ...]
    recent_signals: tuple[SignalRow, ...]
    generated_at: datetime
    whatif: WhatIfCurves | None = None
    """With ``report --whatif POLICY`` only."""
