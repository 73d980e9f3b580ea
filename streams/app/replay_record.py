"""A replay's row in ``runs`` and how its end is told when the store stops taking rows.

A replay writes its run when it starts and again when it ends. Most ends write the store as
usual; two do not need it to work: a full disk under the store (the sink stopped by itself)
and a signal while the store is not taking rows (the sink was hurried). Then the end row is
tried once, and failing to write it is a line in the output rather than a second error that
would hide the first.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime

from connectors.clickhouse.dsn import StoreError
from connectors.clickhouse.store import Store
from streams.app.runs import run_row
from streams.simulation.cluster import ReplayOptions

__all__ = ["RUN_TABLES", "RunRecord"]

RUN_TABLES = (
    "actions",
    "events",
    "gpu_samples",
    "node_profiles",
    "task_profiles",
    "signals",
    "pending_explanations",
    "cluster_frag",
    "dead_letter",
    "runs",
)


@dataclass(frozen=True, slots=True)
class RunRecord:
    """The run's row in the store: written when it starts and again when it ends."""

    store: Store
    run_id: str
    started: datetime
    source: str
    options: ReplayOptions

    async def start(self) -> None:
        """A re-run replaces the run, so rows of two analyses never mix."""
        for table in RUN_TABLES:
            if table != "dead_letter":
                await asyncio.to_thread(
                    self.store.command,
                    f"DELETE FROM {table} WHERE run_id = {{run_id:String}}",
                    {"run_id": self.run_id},
                )
        await self._write("running", {})

    async def end(
        self, status: str, summary: dict[str, object], *, store_trouble: bool = False
    ) -> str | None:
        """Write the run's last row and merge re-runs' duplicate keys now, not some time later.

        With ``store_trouble`` (its disk is full, or it is not taking rows) the merge, which
        needs room, is skipped, and a failure to write the row is returned as the line that
        says so instead of raised."""
        try:
            await self._write(status, summary)
            if not store_trouble:
                for table in RUN_TABLES:
                    await asyncio.to_thread(self.store.command, f"OPTIMIZE TABLE {table} FINAL")
        except StoreError as exc:
            if not store_trouble:
                raise
            return (
                f"the run could not be marked {status} ({exc}): a chDB store marks it "
                "abandoned when it is next opened"
            )
        finally:
            await asyncio.to_thread(self.store.close)
        return None

    async def _write(self, status: str, summary: dict[str, object]) -> None:
        o = self.options
        row = run_row(
            self.run_id,
            status=status,
            started=self.started,
            source=self.source,
            mode=o.mode.value,
            policy=o.policy,
            seed=o.seed,
            params={
                "ratio": o.ratio,
                "time_scale": o.time_scale,
                "node_limit": o.node_limit,
                "inject_oom_storms": o.inject_oom_storms,
            },
            summary=summary,
        )
        await asyncio.to_thread(self.store.insert, "runs", [row])
