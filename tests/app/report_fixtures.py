"""Report data for the report tests: a plausible run and an empty one, each as `ReportData`.

Rendering must not need pyplot, so this module imports nothing but the report's data types
(a test renders from it in a fresh interpreter and checks that)."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

from streams.app.report import FragPoint, ReportData, RunInfo, SignalRow, StrandedNode

STARTED = datetime(2024, 5, 17, 9, 30, tzinfo=UTC)


def make_report_data(*, x_is_time: bool, run_id: str = "run-42") -> ReportData:
    """A plausible run: an FGD-protocol curve (demand x) or a replay timeline (time x)."""
    series, x_label = _time_series() if x_is_time else _demand_series()
    run = RunInfo(
        run_id=run_id,
        source="alibaba-gpu-v2023/openb_pod_list_default",
        mode="timeline" if x_is_time else "fgd",
        policy="fgd",
        seed=42,
        status="finished",
        started_at=STARTED,
        summary={
            "final_frag_ratio_pct": 63.4521,
            "final_frag_amount_pct": 7.126,
            "pods_bound": 8123,
            "pods_failed": 29,
            "time_compression": None if not x_is_time else 1000.0,
            "note": 'cost < $5 & "quoted"',
        },
    )
    return ReportData(
        run=run,
        x_label=x_label,
        x_is_time=x_is_time,
        frag_series=series,
        pending_by_reason=(
            ("Insufficient cpu", 14),
            ("Insufficient nvidia.com/gpu", 31),
            ("node(s) didn't match Pod's node affinity/selector", 6),
            ("node(s) had untolerated taint {gpu: a100-reserved}", 3),
            ("GPU model not allowed (gpu_spec=V100M16|V100M32)", 9),
        ),
        stranded_nodes=tuple(
            StrandedNode(
                node=f"gpu-node-{i:03d}",
                pool="a100-pool" if i % 2 else None,
                idle_gpus=8.0 - i * 0.5,
                lacks=("cpu", "memory") if i % 3 == 0 else ("cpu",),
            )
            for i in range(10)
        ),
        signal_counts=(
            ("fragmentation", "open", 2),
            ("fragmentation", "resolved", 5),
            ("oom_storm", "resolved", 1),
            ("unplaceable_pending", "open", 4),
        ),
        recent_signals=(
            SignalRow(
                opened_at=STARTED + timedelta(hours=3),
                resolved_at=None,
                kind="fragmentation",
                scope_id="pool/a100-pool",
                summary="fragmentation ratio 63% above 50% for 20 min",
            ),
            SignalRow(
                opened_at=STARTED + timedelta(hours=1),
                resolved_at=STARTED + timedelta(hours=1, minutes=12),
                kind="oom_storm",
                scope_id="node/gpu-node-007",
                summary="7 OOM kills in 60 s on GPU 3 <time-sliced>",
            ),
        ),
        generated_at=STARTED + timedelta(days=1),
    )


def _time_series() -> tuple[tuple[FragPoint, ...], str]:
    start = STARTED.timestamp()
    series = tuple(
        FragPoint(
            x=start + 600.0 * i,
            frag_amount_pct=4.0 + 6.0 * math.sin(i / 9.0) ** 2,
            frag_ratio_pct=15.0 + 40.0 * i / 144,
            alloc_pct=30.0 + 55.0 * i / 144,
        )
        for i in range(145)  # one day in 10-minute steps
    )
    return series, "time"


def _demand_series() -> tuple[tuple[FragPoint, ...], str]:
    series = tuple(
        FragPoint(
            x=float(level),
            frag_amount_pct=min(level, 100) * 0.12,
            frag_ratio_pct=12.0 + 0.6 * level,
            alloc_pct=min(level * 0.9, 88.0),
        )
        for level in range(0, 131, 5)
    )
    return series, "arrived GPU demand (% of capacity)"


def make_empty_report_data() -> ReportData:
    """A run that recorded nothing at all: every section must still render."""
    return ReportData(
        run=RunInfo(
            run_id="empty-run",
            source="",
            mode="fgd",
            policy="random",
            seed=0,
            status="failed",
            started_at=datetime(2024, 1, 1),  # naive on purpose
            summary={},
        ),
        x_label="arrived GPU demand (% of capacity)",
        x_is_time=False,
        frag_series=(),
        pending_by_reason=(),
        stranded_nodes=(),
        signal_counts=(),
        recent_signals=(),
        generated_at=datetime(2024, 1, 1, 1),
    )
