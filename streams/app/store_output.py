"""The embedded runner's output: every emission as rows of the history store."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime

import orjson

from connectors.clickhouse.rows import (
    event_row,
    gpu_sample_row,
    node_profile_row,
    signal_row,
    task_profile_row,
)
from connectors.clickhouse.sink import ClickHouseSink
from models import GpuSampleEvent, PodEvent, TaskProfile, to_json
from streams.fragmentation.analysis import ClusterFragmentation
from streams.fragmentation.pending import Explanation
from streams.profiles.join import NodeProfileUpdate, TaskProfileUpdate
from streams.runner.embedded import Emission, Failure

Row = dict[str, object]


def explanation_row(
    run_id: str, key: str, exp: Explanation, task: TaskProfile, at: datetime
) -> Row:
    r = task.requests
    return {
        "run_id": run_id,
        "ts": at,
        "pod": key,
        "namespace": key.split("/", 1)[0],
        "queue": task.queue,
        "gpu_count": r.gpu_count,
        "gpu_milli": r.gpu_milli,
        "cpu_milli": r.cpu_milli,
        "memory_mib": r.memory_mib,
        "fits_cluster_total": int(exp.fits_cluster_total),
        "fits_some_node": int(exp.fits_some_node),
        "unplaceable": int(exp.unplaceable),
        "reasons": {reason.value: n for reason, n in exp.blocking},
        "near_misses": orjson.dumps(exp.evidence()["near_misses"]).decode(),
        "nodes_checked": exp.nodes_checked,
    }


def cluster_row(
    run_id: str, snap: ClusterFragmentation, at: datetime, arrived_pct: float | None
) -> Row:
    return {
        "run_id": run_id,
        "ts": at,
        "nodes": snap.nodes,
        "capacity_gpus": snap.capacity_gpus,
        "idle_gpus": snap.idle_gpus,
        "frag_gpus": snap.frag_gpus,
        "frag_amount_pct": snap.frag_amount_pct,
        "frag_ratio_pct": snap.frag_ratio_pct,
        "alloc_pct": snap.alloc_pct,
        "arrived_pct": arrived_pct,
        "typical_pods": snap.typical_pods,
        "pending_pods": snap.pending_pods,
        "unplaceable_pods": snap.unplaceable_pods,
        "stranded_nodes": snap.stranded_nodes,
    }


class StoreOutput:
    """Turns emissions into rows; the sink batches, retries and dead-letters them."""

    def __init__(self, sink: ClickHouseSink, *, run_id: str, track_arrivals: bool) -> None:
        self.sink = sink
        self.run_id = run_id
        self.track_arrivals = track_arrivals
        self._seq = 0
        self._seen_pods: set[str] = set()
        self._arrived_milli = 0
        # signals handed to the store, by kind and state: the summary needs counts, not rows
        self.signal_counts: dict[str, dict[str, int]] = {}

    def _arrived_pct(self, snap: ClusterFragmentation) -> float | None:
        if not self.track_arrivals or not snap.capacity_gpus:
            return None
        return self._arrived_milli / (snap.capacity_gpus * 1000.0) * 100.0

    async def emit(self, item: Emission) -> None:
        run = self.run_id
        batches: dict[str, list[Row]] = {}

        def add(table: str, row: Row) -> None:
            batches.setdefault(table, []).append(row)

        if item.snapshot is not None:
            at, snap = item.snapshot
            add("cluster_frag", cluster_row(run, snap, at, self._arrived_pct(snap)))
        env = item.env
        if env is not None:
            add("events", event_row(run, env, ingested_at=datetime.now(UTC)))
            if isinstance(env.payload, GpuSampleEvent):
                add("gpu_samples", gpu_sample_row(run, env))
            p = env.payload
            if (
                isinstance(p, PodEvent)
                and p.change == "upsert"
                and p.pod.key not in self._seen_pods
            ):
                self._seen_pods.add(p.pod.key)
                self._arrived_milli += p.pod.requests.total_gpu_milli
        for u in item.updates:
            self._seq += 1
            if isinstance(u, NodeProfileUpdate):
                add(
                    "node_profiles",
                    node_profile_row(run, u.name, u.profile, at=u.at, seq=self._seq),
                )
            elif isinstance(u, TaskProfileUpdate):
                add(
                    "task_profiles", task_profile_row(run, u.key, u.profile, at=u.at, seq=self._seq)
                )
        for s in item.signals:
            add("signals", signal_row(run, s))
            per_kind = self.signal_counts.setdefault(s.kind.value, {})
            per_kind[s.state] = per_kind.get(s.state, 0) + 1
        if item.explanations is not None:
            for key, (exp, task) in sorted(item.explanations.items()):
                add("pending_explanations", explanation_row(run, key, exp, task, item.at))
        for table, rows in batches.items():
            await self.sink.write(table, rows)

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

    async def final(self, snapshot: tuple[datetime, ClusterFragmentation] | None) -> None:
        if snapshot is not None:
            at, snap = snapshot
            await self.sink.write(
                "cluster_frag", [cluster_row(self.run_id, snap, at, self._arrived_pct(snap))]
            )
