"""The per-class explanation path gives the answers of the plain one (every node checked
for every pod, as ``explain_request`` did before ``request_class``), bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from models import ResourceRequest, TaskProfile
from models.analysis import BlockReason, Explanation, NearMiss
from streams.app.bench import synthetic
from streams.app.bench.view_case import changes, joined_updates, loaded
from streams.app.lifecycle.settings_load import load_settings
from streams.fragmentation import masks as mk
from streams.fragmentation.capacity import CapacityIndex
from streams.fragmentation.pending import explain_task
from streams.pipeline import define_pipeline


def reference(index: CapacityIndex, task: TaskProfile, k: int = 3) -> Explanation:
    """The explanation as computed before the per-class cache: every mask for every pod."""
    req = task.requests
    free = mk.Free.of(index)
    m = mk.masks(index, req, task.gpu_models, task.tolerations, free)
    blocked = m.any_block()
    active = index.active
    counts = [(r, int(v.sum())) for r, v in m.reasons.items()]
    candidates = np.flatnonzero(active & blocked)
    near: list[NearMiss] = []
    if k and len(candidates):
        miss_cpu = np.maximum(0, req.cpu_milli - index.cpu_free[candidates])
        miss_mem = np.maximum(0, req.memory_mib - index.mem_free[candidates])
        miss_gpu = m.missing[candidates]
        hard = np.zeros(len(candidates))
        for r in (BlockReason.UNSCHEDULABLE, BlockReason.TAINT, BlockReason.GPU_MODEL):
            hard += m.reasons[r][candidates]
        score = (
            hard
            + miss_cpu / max(1, req.cpu_milli)
            + miss_mem / max(1, req.memory_mib)
            + miss_gpu / max(1, req.gpu_count + sum(req.mig.values()))
            - 0.5 * m.reasons[BlockReason.GPU_MEMORY][candidates] / max(1, req.gpu_count)
        )
        names = [index.names[i] or "" for i in candidates]
        for j in sorted(range(len(candidates)), key=lambda j: (float(score[j]), names[j]))[:k]:
            i = int(candidates[j])
            near.append(
                NearMiss(
                    node=names[j],
                    reasons=tuple(r for r, v in m.reasons.items() if v[i]),
                    missing_cpu_milli=int(miss_cpu[j]),
                    missing_memory_mib=int(miss_mem[j]),
                    missing_gpus=int(miss_gpu[j]),
                )
            )
    return Explanation(
        fits_cluster_total=(
            int(index.cpu_free[active].sum()) >= req.cpu_milli
            and int(index.mem_free[active].sum()) >= req.memory_mib
            and mk.fits_total(index, free, [req])
        ),
        fits_some_node=bool((active & ~blocked).any()),
        blocking=tuple(sorted(((r, n) for r, n in counts if n), key=lambda rn: (-rn[1], rn[0]))),
        near_misses=tuple(near),
        nodes_checked=int(active.sum()),
    )


@pytest.mark.parametrize(("seed", "load"), [(1, 3.0), (2, 1.0), (3, 0.3)])
def test_same_explanations_as_every_node_checked(seed: int, load: float) -> None:
    pipeline = define_pipeline(load_settings())
    c = synthetic.cluster(seed=seed, nodes=150, running=int(load * 150), pending=120)
    analysis = loaded(pipeline, list(joined_updates(pipeline, synthetic.state_events(c))))
    view = analysis.view
    tasks = [view.tasks[k] for k in sorted(view.pending)]
    # odd requests too: CPU only, more memory than any node has, a shared card
    base = tasks[0]
    odd = [
        ResourceRequest(cpu_milli=1000, memory_mib=1024),
        ResourceRequest(cpu_milli=4_000_000, memory_mib=60_000_000, gpu_count=1, gpu_milli=1000),
        ResourceRequest(cpu_milli=0, memory_mib=0, gpu_count=1, gpu_milli=300),
    ]
    tasks += [base.model_copy(update={"requests": r}) for r in odd]
    for step in range(3):
        for task in tasks:
            for k in (0, 1, 3, 10):
                assert explain_task(view.index, task, near_miss_nodes=k) == reference(
                    view.index, task, k
                )
        for u in changes(list(view.nodes.values()), seed=seed + step, count=40):
            analysis.apply(u)


def test_a_node_change_is_seen_by_the_next_explanation() -> None:
    pipeline = define_pipeline(load_settings())
    c = synthetic.cluster(seed=5, nodes=40, running=120, pending=10)
    analysis = loaded(pipeline, list(joined_updates(pipeline, synthetic.state_events(c))))
    view = analysis.view
    task = view.tasks[sorted(view.pending)[0]]
    before = explain_task(view.index, task)
    version = view.index.version
    for u in changes(list(view.nodes.values()), seed=9, count=20):
        analysis.apply(u)
    assert view.index.version > version
    after = explain_task(view.index, task)
    assert after == reference(view.index, task)
    assert after != before
