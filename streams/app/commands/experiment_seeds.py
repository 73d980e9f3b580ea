"""The seeds of `gpufrag experiment`, spread over worker processes.

Each seed is its own run (its own shuffle, tie order and cluster), so seeds run apart and their
curves are averaged in seed order afterwards: the result does not depend on the worker count.
The FGD paper's grid (3 policies x 4 workloads x 10 seeds) is 120 such runs of about a second
each; one process per core halves it on a 2-core machine.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor

from streams.fragmentation.shapes import TypicalPods
from streams.placement.experiment import Curve, run_experiment
from streams.placement.spec import NodeSpec, PodSpec


def default_workers() -> int:
    """The cores this process may run on (a container's CPU set, not the host's count)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def _seed_curve(
    nodes: Sequence[NodeSpec],
    pods: Sequence[PodSpec],
    policy: str,
    seed: int,
    typical: TypicalPods,
    ratio: float,
) -> Curve:
    return run_experiment(nodes, pods, policy=policy, seeds=[seed], typical=typical, ratio=ratio)


def seed_curves(
    nodes: Sequence[NodeSpec],
    pods: Sequence[PodSpec],
    *,
    policy: str,
    seeds: Sequence[int],
    typical: TypicalPods,
    ratio: float,
    workers: int,
    done: Callable[[], None],
) -> list[Curve]:
    """One curve per seed, in the order of ``seeds``; ``done`` is called as each finishes.

    Workers are spawned, not forked: a fork would copy the caller's threads (the progress
    bar's refresher) in whatever state they are in; a spawned worker pays its imports once,
    a fraction of one seed's second.
    """
    workers = max(1, min(workers, len(seeds)))
    if workers == 1:
        curves = []
        for seed in seeds:
            curves.append(_seed_curve(nodes, pods, policy, seed, typical, ratio))
            done()
        return curves
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        futures = [
            pool.submit(_seed_curve, nodes, pods, policy, seed, typical, ratio) for seed in seeds
        ]
        for future in futures:
            future.add_done_callback(lambda _: done())
        return [future.result() for future in futures]
