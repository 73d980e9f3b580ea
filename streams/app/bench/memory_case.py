"""`memory`: peak RSS of a process holding the profiles of a large cluster."""

from __future__ import annotations

from streams.app.bench.figures import Figure, Goal, Samples
from streams.app.bench.procs import module_with_peak, run_fresh
from streams.app.bench.runner import BenchError, Context


def memory(ctx: Context) -> list[Figure]:
    s = ctx.scale
    argv = module_with_peak(
        "streams.app.bench.memory_probe", str(s.memory_nodes), str(s.memory_pods), str(ctx.seed)
    )
    # one run, no warm-up: the peak of one deterministic build does not move with the
    # machine's load, and a run takes about a minute at the large scale
    ctx.step(f"memory: {s.memory_nodes} nodes, {s.memory_pods} pods")
    run = run_fresh(argv)
    if run.peak_mib is None:
        raise BenchError("the memory probe did not report its peak memory")
    return [
        Figure(
            case="memory",
            name="peak_mib",
            unit="MiB",
            samples=Samples((run.peak_mib,)),
            targets=(Goal(1024),),
            params={
                "nodes": s.memory_nodes,
                "pods": s.memory_pods,
                "held": run.stdout.decode().strip(),
            },
        ),
    ]
