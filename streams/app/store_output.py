"""The embedded runner's output: every emission as rows of the history store."""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
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
from models import Action, GpuSampleEvent, Signal, to_json
from models.actuation import REQUEST_TYPES, ActionRequest
from models.analysis import InstantReport
from streams.profiles.join import NodeProfileUpdate, ProfileUpdate, TaskProfileUpdate
from streams.profiles.operators import ordered_deltas
from streams.runner.embedded import Emission, Failure


class StoreOutput:
    """Turns emissions into rows; the sink batches, retries and dead-letters them."""

    def __init__(
        self,
        sink: ClickHouseSink,
        *,
        run_id: str,
        on_signal: Callable[[Signal], object] | None = None,
        actuate: Callable[[ActionRequest], Awaitable[Action]] | None = None,
        on_action: Callable[[Action], object] | None = None,
    ) -> None:
        """``on_signal`` sees every signal as it is stored (replay matches injected storms);
        ``actuate`` carries out what the planners asked to enforce (none: they stay proposals
        in the store); ``on_action`` sees every audit record, what the actuator answered too."""
        self.sink = sink
        self.on_signal = on_signal
        self.actuate = actuate
        self.on_action = on_action
        self.action_counts: dict[str, dict[str, int]] = {}
        """Audit records stored, by kind and outcome."""
        self.run_id = run_id
        # signals handed to the store, by kind and state: the summary needs counts, not rows
        self.signal_counts: dict[str, dict[str, int]] = {}

    async def emit(self, item: Emission) -> None:
        batches: dict[str, list[Row]] = {}
        if item.env is not None:
            self._event_rows(item, batches)
            self._profile_rows(item, batches)
        for out in item.outputs:
            if isinstance(out, REQUEST_TYPES) and self.actuate is not None:
                out = await self.actuate(out)
            for table, row in self._rows_of(out):
                batches.setdefault(table, []).append(row)
        for table, rows in batches.items():
            await self.sink.write(table, rows)

    def _event_rows(self, item: Emission, batches: dict[str, list[Row]]) -> None:
        env = item.env
        assert env is not None
        batches.setdefault("events", []).append(
            event_row(self.run_id, env, ingested_at=datetime.now(UTC))
        )
        p = env.payload
        if isinstance(p, GpuSampleEvent):
            batches.setdefault("gpu_samples", []).append(gpu_sample_row(self.run_id, env))

    def _profile_rows(self, item: Emission, batches: dict[str, list[Row]]) -> None:
        """Each profile change of the event, under the key the distributed runner gives the
        same delta (``OrderKey.row_seq``), so both runners store it on one row."""
        assert item.env is not None
        run = self.run_id
        kinds = (NodeProfileUpdate, TaskProfileUpdate)
        deltas: list[ProfileUpdate] = [u for u in item.outputs if isinstance(u, kinds)]
        for key, u in ordered_deltas(item.env, deltas):
            seq = key.row_seq()
            if isinstance(u, NodeProfileUpdate):
                row = node_profile_row(run, u.name, u.profile, at=u.at, seq=seq)
                batches.setdefault("node_profiles", []).append(row)
            elif isinstance(u, TaskProfileUpdate):
                row = task_profile_row(run, u.key, u.profile, at=u.at, seq=seq)
                batches.setdefault("task_profiles", []).append(row)

    def _rows_of(self, out: object) -> list[tuple[str, Row]]:
        run = self.run_id
        if isinstance(out, Signal):
            per_kind = self.signal_counts.setdefault(out.kind.value, {})
            per_kind[out.state] = per_kind.get(out.state, 0) + 1
            if self.on_signal is not None:
                self.on_signal(out)
            return [("signals", signal_row(run, out))]
        if isinstance(out, Action):
            per_kind = self.action_counts.setdefault(str(out.kind), {})
            per_kind[out.outcome.value] = per_kind.get(out.outcome.value, 0) + 1
            if self.on_action is not None:
                self.on_action(out)
            return [("actions", action_row(run, out))]
        if isinstance(out, InstantReport):
            rows = [("cluster_frag", cluster_row(run, out.summary, out.at))]
            for key, (exp, task) in sorted((out.explanations or {}).items()):
                rows.append(("pending_explanations", explanation_row(run, key, exp, task, out.at)))
            return rows
        return []

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
