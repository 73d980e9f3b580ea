"""The history store as a sink of the embedded runner: every channel of an emission as rows."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from datetime import UTC, datetime

from connectors.clickhouse.rows import (
    Row,
    action_row,
    cluster_row,
    event_row,
    explanation_row,
    gpu_sample_row,
    node_profile_row,
    signal_row,
    task_profile_row,
)
from connectors.clickhouse.sink import ClickHouseSink
from models import Envelope, GpuSampleEvent, to_json
from streams.profiles.join import NodeProfileUpdate, ProfileUpdate, TaskProfileUpdate
from streams.profiles.operators import ordered_deltas
from streams.runner.embedded import Emission, Failure


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
        batches: dict[str, list[Row]] = {}

        def add(table: str, row: Row) -> None:
            batches.setdefault(table, []).append(row)

        run = self.run_id
        if item.env is not None:
            self._event_rows(item.env, add)
            self._profile_rows(item.env, item.deltas, add)
        for signal in item.signals():
            per_kind = self.signal_counts.setdefault(signal.kind, {})
            per_kind[signal.state] = per_kind.get(signal.state, 0) + 1
            add("signals", signal_row(run, signal))
        for action in item.actions():
            per_kind = self.action_counts.setdefault(str(action.kind), {})
            per_kind[action.outcome.value] = per_kind.get(action.outcome.value, 0) + 1
            add("actions", action_row(run, action))
        for report in item.reports():
            add("cluster_frag", cluster_row(run, report.summary, report.at))
            for key, (exp, task) in sorted((report.explanations or {}).items()):
                add("pending_explanations", explanation_row(run, key, exp, task, report.at))
        for table, rows in batches.items():
            await self.sink.write(table, rows)

    def _event_rows(self, env: Envelope, add: Callable[[str, Row], None]) -> None:
        add("events", event_row(self.run_id, env, ingested_at=datetime.now(UTC)))
        if isinstance(env.payload, GpuSampleEvent):
            add("gpu_samples", gpu_sample_row(self.run_id, env))

    def _profile_rows(
        self, env: Envelope, updates: list[ProfileUpdate], add: Callable[[str, Row], None]
    ) -> None:
        """Each profile change of the event, under the key the distributed runner gives the
        same delta (``OrderKey.row_seq``), so both runners store it on one row."""
        run = self.run_id
        kinds = (NodeProfileUpdate, TaskProfileUpdate)
        deltas: list[ProfileUpdate] = [u for u in updates if isinstance(u, kinds)]
        for key, u in ordered_deltas(env, deltas):
            seq = key.row_seq()
            if isinstance(u, NodeProfileUpdate):
                add("node_profiles", node_profile_row(run, u.name, u.profile, at=u.at, seq=seq))
            elif isinstance(u, TaskProfileUpdate):
                add("task_profiles", task_profile_row(run, u.key, u.profile, at=u.at, seq=seq))

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
