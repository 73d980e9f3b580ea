"""The history store as a sink of the embedded runner: every channel of an emission as rows.

The hot tables (events, profiles, cluster reports: 81,000 of a replay's rows) go to the sink as
value tuples in their column order (``row_values``), buffered as they are and inserted as
columns; the few signal, action and explanation rows go as dicts."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime

from connectors.clickhouse.row_values import (
    CLUSTER_COLUMNS,
    EVENT_COLUMNS,
    NODE_PROFILE_COLUMNS,
    TASK_PROFILE_COLUMNS,
    Values,
    cluster_values,
    event_values,
    node_profile_values,
    task_profile_values,
)
from connectors.clickhouse.rows import (
    Row,
    action_row,
    explanation_row,
    gpu_sample_row,
    signal_row,
    task_peak_row,
)
from connectors.clickhouse.sink import ClickHouseSink
from models import Envelope, GpuSampleEvent, to_json
from streams.profiles.join import (
    NodeProfileUpdate,
    PeakReport,
    ProfileUpdate,
    TaskProfileUpdate,
)
from streams.profiles.operators import ordered_deltas
from streams.runner.embedded import Emission, Failure

_PROFILE_KINDS = (NodeProfileUpdate, TaskProfileUpdate, PeakReport)
_COLUMNS = {
    "events": EVENT_COLUMNS,
    "node_profiles": NODE_PROFILE_COLUMNS,
    "task_profiles": TASK_PROFILE_COLUMNS,
    "cluster_frag": CLUSTER_COLUMNS,
}


class StoreOutput:
    """Turns emissions into rows; the sink batches, retries and dead-letters them."""

    def __init__(self, sink: ClickHouseSink, *, run_id: str) -> None:
        self.sink = sink
        self.run_id = run_id
        self.action_counts: dict[str, dict[str, int]] = {}
        """Audit records stored, by kind and outcome."""
        # signals handed to the store, by kind and state: the summary needs counts, not rows
        self.signal_counts: dict[str, dict[str, int]] = {}

    async def take(self, item: Emission) -> None:
        # every row is built before any is written, so an emission a converter refuses
        # leaves no part of itself in the store
        run = self.run_id
        hot: dict[str, list[Values]] = {}
        rows: dict[str, list[Row]] = {}

        def add(table: str, row: Row) -> None:
            rows.setdefault(table, []).append(row)

        if item.env is not None:
            env = item.env
            hot["events"] = [event_values(run, env, ingested_at=datetime.now(UTC))]
            if isinstance(env.payload, GpuSampleEvent):
                add("gpu_samples", gpu_sample_row(run, env))
            if item.deltas and (peaks := self._profile_rows(env, item.deltas, hot)):
                rows["task_memory_peaks"] = peaks
        for signal in item.signals():
            per_kind = self.signal_counts.setdefault(signal.kind, {})
            per_kind[signal.state] = per_kind.get(signal.state, 0) + 1
            add("signals", signal_row(run, signal))
        for action in item.actions():
            per_kind = self.action_counts.setdefault(str(action.kind), {})
            per_kind[action.outcome.value] = per_kind.get(action.outcome.value, 0) + 1
            add("actions", action_row(run, action))
        for report in item.reports():
            hot.setdefault("cluster_frag", []).append(
                cluster_values(run, report.summary, report.at)
            )
            for key, (exp, task) in sorted((report.explanations or {}).items()):
                add("pending_explanations", explanation_row(run, key, exp, task, report.at))
        for table, values in hot.items():
            await self.sink.write_rows(table, _COLUMNS[table], values)
        for table, dicts in rows.items():
            await self.sink.write(table, dicts)

    def _profile_rows(
        self, env: Envelope, updates: list[ProfileUpdate], hot: dict[str, list[Values]]
    ) -> list[Row]:
        """Each profile change of the event, under the key the distributed runner gives the
        same delta (``OrderKey.row_seq``), so both runners store it on one row; returns the
        memory peaks' rows."""
        run = self.run_id
        peaks: list[Row] = []
        deltas: list[ProfileUpdate] = [u for u in updates if isinstance(u, _PROFILE_KINDS)]
        for key, u in ordered_deltas(env, deltas):
            seq = key.row_seq()
            if isinstance(u, NodeProfileUpdate):
                row = node_profile_values(run, u.name, u.profile, at=u.at, seq=seq)
                hot.setdefault("node_profiles", []).append(row)
            elif isinstance(u, TaskProfileUpdate):
                row = task_profile_values(run, u.key, u.profile, at=u.at, seq=seq)
                hot.setdefault("task_profiles", []).append(row)
            elif isinstance(u, PeakReport):  # a few a storm: a dict row, like the samples
                peaks.append(
                    task_peak_row(run, u.key, node=u.node, used_mib=u.used_mib, at=u.at, seq=seq)
                )
        return peaks

    async def dead_letter(self, failure: Failure) -> None:
        payload = to_json(failure.env).decode()
        digest = hashlib.sha1(f"{failure.stage}\x1f{payload}".encode(), usedforsecurity=False)
        await self.sink.write(
            "dead_letter",
            [
                {
                    "id": digest.hexdigest(),
                    "ts": failure.env.event_time,
                    "target": f"stage:{failure.stage}",
                    "reason": failure.reason,
                    "row": payload,
                }
            ],
        )
