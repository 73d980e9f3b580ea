"""A run's row in ``runs``, written when it starts and again when it ends: the one lifecycle
`gpufrag replay`, `gpufrag watch --bus embedded` and `gpufrag sink` share.

Most ends write the store as usual; two do not need it to work: a full disk under the store
(the sink stopped by itself) and a signal while the store is not taking rows (the sink was
hurried). Then the end row is tried once, and failing to write it is a line in the output
rather than a second error that would hide the first.
"""

from __future__ import annotations

import asyncio
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime

from connectors.clickhouse.disk_full import hold_merges
from connectors.clickhouse.dsn import StoreError
from connectors.clickhouse.store import Store
from streams.app.lifecycle.runs import run_row

__all__ = ["RUN_TABLES", "RunRecord", "RunSpec", "status_of"]

RUN_TABLES = (
    "actions",
    "events",
    "gpu_samples",
    "node_profiles",
    "task_profiles",
    "task_memory_peaks",
    "signals",
    "pending_explanations",
    "cluster_frag",
    "dead_letter",
    "run_writers",
    "runs",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunSpec:
    """What a run is: the columns of its row that do not change while it runs."""

    run_id: str
    source: str
    mode: str
    policy: str = ""
    seed: int = 0
    params: dict[str, object] = field(default_factory=dict)


def status_of(failure: BaseException | None, *, interrupted: bool = False) -> str:
    return "failed" if failure is not None else ("interrupted" if interrupted else "finished")


@dataclass(slots=True)
class RunRecord:
    """The run's row in the store. It owns ``store`` from ``start`` on and closes it at
    ``end``."""

    store: Store
    info: RunSpec
    started: datetime = field(default_factory=lambda: datetime.now(UTC))

    async def start(self, *, replace: bool = False) -> None:
        """``replace``: a re-run of the same run id (a replay of the same trace and options)
        replaces it, so rows of two analyses never mix."""
        if replace:
            for table in RUN_TABLES:
                if table != "dead_letter":
                    await asyncio.to_thread(
                        self.store.command,
                        f"DELETE FROM {table} WHERE run_id = {{run_id:String}}",
                        {"run_id": self.info.run_id},
                    )
        await self._write("running", {})

    async def end(
        self,
        status: str,
        summary: dict[str, object],
        *,
        failure: BaseException | None = None,
        store_trouble: bool = False,
        merge: bool = False,
    ) -> str | None:
        """Write the run's last row, with ``failure`` as its error, and close the store.

        ``merge``: collapse re-runs' duplicate keys now rather than some time later (a
        replay). With ``store_trouble`` (its disk is full, or it is not taking rows) the
        engine's background merges are stopped first (see ``hold_merges``), the final merge,
        which needs room, is skipped, and a failure to write the row is returned as
        the line that says so instead of raised."""
        if failure is not None:
            summary["error"] = f"{type(failure).__name__}: {failure}"
        try:
            if store_trouble:
                # best effort: a store that cannot stop its merges may still take the row
                with suppress(StoreError):
                    await asyncio.to_thread(hold_merges, self.store)
            await self._write(status, summary)
            if merge and not store_trouble:
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
        i = self.info
        row = run_row(
            i.run_id,
            status=status,
            started=self.started,
            source=i.source,
            mode=i.mode,
            policy=i.policy,
            seed=i.seed,
            params=i.params,
            summary=summary,
        )
        await asyncio.to_thread(self.store.insert, "runs", [row])
