"""The `memory` case's child process: the cluster operator holding every node's and pod's
profile, built through the real join; run by itself so that its peak RSS is its own.

``python -m streams.app.bench.memory_probe NODES PODS SEED`` prints how many profiles it holds.
"""

from __future__ import annotations

import sys

from streams.app.bench import synthetic
from streams.app.bench.view_case import joined_updates, loaded
from streams.app.lifecycle.settings_load import load_settings
from streams.pipeline import define_pipeline


def main(argv: list[str]) -> None:
    nodes, pods, seed = (int(a) for a in argv)
    running = 2 * nodes  # GPU pods on cards; the rest run without GPUs, 2,000 wait per 10,000
    pending = nodes // 5
    c = synthetic.cluster(
        seed=seed, nodes=nodes, running=running, pending=pending, cpu_only=pods - running - pending
    )
    pipeline = define_pipeline(load_settings())
    analysis = loaded(pipeline, joined_updates(pipeline, synthetic.state_events(c)))
    print(f"{len(analysis.view.nodes)} nodes, {len(analysis.view.tasks)} pods")


if __name__ == "__main__":
    main(sys.argv[1:])
