"""The distributed runner's history records as store rows, as the embedded runner stores them
(``StoreOutput``): input events (and GPU samples), profile snapshots from the join's deltas, and
the cluster view's report on each instant (fragmentation, pending explanations).

Every row is a pure function of the record and its place on the bus, and lands on the table's
ReplacingMergeTree key, so reading a record again (a restart, a rebalance, a new group from the
earliest offset) replaces the row it wrote instead of adding one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from connectors.clickhouse.rows import (
    Row,
    cluster_row,
    event_row,
    explanation_row,
    gpu_sample_row,
    node_profile_row,
    task_peak_row,
    task_profile_row,
)
from models import GpuSampleEvent
from models.progress import SourceProgress
from streams.distributed.codec import decode, decode_input, decode_report
from streams.profiles.join import NodeProfileUpdate, PeakReport, TaskProfileUpdate

Rows = list[tuple[str, Row]]
TELEMETRY_SEQ = 2**64 - 1
"""The profile tables' largest seq (UInt64): after every ordered delta of the instant (only
an older worker's deltas come without a place)."""


@dataclass
class HistoryRows:
    """Maps the records of the input topics, the capacity deltas and the cluster reports."""

    run_id: str
    inputs: frozenset[str]
    deltas: str | None = None
    reports: str | None = None
    counts: dict[str, int] = field(
        default_factory=lambda: {
            "events": 0,
            "node_profiles": 0,
            "task_profiles": 0,
            "task_memory_peaks": 0,
            "cluster_reports": 0,
            "skipped": 0,
        }
    )
    """Records stored, by what they became; ``skipped``: progress reports, other messages and
    unreadable records (the workers dead-letter unreadable input themselves)."""

    def handles(self, topic: str) -> bool:
        return topic in self.inputs or topic in (self.deltas, self.reports)

    def rows(self, topic: str, raw: bytes) -> Rows:
        try:
            if topic in self.inputs:
                out = self._event(raw)
            elif topic == self.deltas:
                out = self._profile(raw)
            else:
                out = self._report(raw)
        except Exception:  # not history: the worker that read it first kept it, with why
            out = []
        if not out:
            self.counts["skipped"] += 1
        return out

    def _event(self, raw: bytes) -> Rows:
        env = decode_input(raw)
        if isinstance(env, SourceProgress):
            return []
        self.counts["events"] += 1
        # ingested_at is not in the key: a re-read replaces the row, renewing its TTL
        out: Rows = [("events", event_row(self.run_id, env, ingested_at=datetime.now(UTC)))]
        if isinstance(env.payload, GpuSampleEvent):
            out.append(("gpu_samples", gpu_sample_row(self.run_id, env)))
        return out

    def _profile(self, raw: bytes) -> Rows:
        decoded = decode(raw)
        if isinstance(decoded, SourceProgress):
            return []
        msg, order = decoded
        # seq orders the changes within one instant (the key is run, name, ts, seq): the
        # delta's place in the source order, as the embedded runner stores it, so a re-read
        # record, or a delta a restarted worker sends again, replaces the row it wrote. Every
        # delta of this version has its place; one without (a peak-driven task delta of a
        # worker before peaks moved to the node stage) takes the instant's last seq.
        seq = order.row_seq() if order is not None else TELEMETRY_SEQ
        if isinstance(msg, NodeProfileUpdate):
            self.counts["node_profiles"] += 1
            row = node_profile_row(self.run_id, msg.name, msg.profile, at=msg.at, seq=seq)
            return [("node_profiles", row)]
        if isinstance(msg, TaskProfileUpdate):
            self.counts["task_profiles"] += 1
            row = task_profile_row(self.run_id, msg.key, msg.profile, at=msg.at, seq=seq)
            return [("task_profiles", row)]
        if isinstance(msg, PeakReport):
            self.counts["task_memory_peaks"] += 1
            row = task_peak_row(
                self.run_id, msg.key, node=msg.node, used_mib=msg.used_mib, at=msg.at, seq=seq
            )
            return [("task_memory_peaks", row)]
        return []

    def _report(self, raw: bytes) -> Rows:
        report = decode_report(raw)
        self.counts["cluster_reports"] += 1
        out: Rows = [("cluster_frag", cluster_row(self.run_id, report.summary, report.at))]
        for key, (exp, task) in sorted((report.explanations or {}).items()):
            row = explanation_row(self.run_id, key, exp, task, report.at)
            out.append(("pending_explanations", row))
        return out
