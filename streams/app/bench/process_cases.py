"""Cases timed in a fresh process, as a user runs them: `replay`, the CLI's start, `inspect`."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from connectors.trace.bundled import bundled_nodes_path
from streams.app.bench import synthetic
from streams.app.bench.figures import Figure, Goal, not_run
from streams.app.bench.procs import gpufrag, module_with_peak, run_fresh
from streams.app.bench.runner import BenchError, Context, measure, measure_each

POLICY = "fgd"
TRACE_SEED = 42


def timed_with_peak(*args: str) -> tuple[float, float]:
    """`gpufrag ARGS` in a fresh process: its wall time and its own peak RSS."""
    run = run_fresh(module_with_peak("streams.app", *args))
    if run.peak_mib is None:
        raise BenchError(f"gpufrag {' '.join(args)} did not report its peak memory")
    return run.wall_s, run.peak_mib


def trace_nodes(ctx: Context) -> list[str]:
    """``--nodes`` for `replay` and `experiment`: the bundled list, or its first rows at a
    small scale (a small cluster fills sooner, so the padded workload is smaller too)."""
    limit = ctx.scale.trace_nodes
    if limit is None:
        return []
    path = ctx.workdir / f"nodes-{limit}.csv"
    if not path.exists():
        lines = bundled_nodes_path().read_text(encoding="utf-8").splitlines()
        path.write_text("\n".join(lines[: limit + 1]) + "\n", encoding="utf-8")
    return ["--nodes", str(path)]


def replay(ctx: Context) -> list[Figure]:
    nodes = trace_nodes(ctx)
    stores = iter(range(1_000_000))

    def replay_args(*extra: str) -> tuple[str, ...]:
        # a fresh store each time: a second replay into one store dedupes instead of writing
        store = f"chdb://{ctx.workdir / f'replay-store-{next(stores)}'}"
        seeded = ("--policy", POLICY, "--seed", str(TRACE_SEED))
        return ("replay", *seeded, *nodes, "--store", store, *extra, "--json")

    def one_replay() -> tuple[float, float]:
        return timed_with_peak(*replay_args())

    def one_experiment() -> tuple[float, float]:
        args = ("experiment", "--policy", POLICY, "--seeds", str(TRACE_SEED), *nodes)
        return timed_with_peak(*args, "--json")

    def one_enforced() -> tuple[float]:
        return (run_fresh(gpufrag(*replay_args("--actions", "enforce"))).wall_s,)

    wall, peak = measure_each(ctx, "replay", one_replay)
    base_wall, base_peak = measure_each(ctx, "replay: experiment baseline", one_experiment)
    params = {"policy": POLICY, "seed": TRACE_SEED, "nodes": ctx.scale.trace_nodes or "all"}
    enforce_goal = (Goal(2.0, of="ratio"),)
    if ctx.scale.replay_enforce:
        # one run, no warm-up (the plain replays warmed the same files)
        (enforced,) = measure_each(ctx, "replay --actions enforce", one_enforced, warmup=0, runs=1)
        enforce = Figure(
            case="replay",
            name="enforce_wall_s",
            unit="s",
            samples=enforced,
            baseline="gpufrag replay (the same trace, policy and seed, no actions)",
            baseline_samples=wall,
            targets=enforce_goal,
            params={**params, "actions": "enforce"},
        )
    else:
        why = f"left out at the {ctx.scale.name} scale (minutes a run; docs/performance.md)"
        enforce = not_run("replay", "enforce_wall_s", "s", why, targets=enforce_goal)
    baseline = f"gpufrag experiment --policy {POLICY} --seeds {TRACE_SEED}"
    return [
        Figure(
            case="replay",
            name="wall_s",
            unit="s",
            samples=wall,
            baseline=baseline,
            baseline_samples=base_wall,
            targets=(Goal(1.5, of="ratio"),),
            params=params,
        ),
        Figure(
            case="replay",
            name="peak_mib",
            unit="MiB",
            samples=peak,
            baseline=baseline,
            baseline_samples=base_peak,
            targets=(Goal(400),),
            params=params,
        ),
        enforce,
    ]


def cli(ctx: Context) -> list[Figure]:
    def timed(*args: str) -> float:
        return run_fresh(gpufrag(*args)).wall_s

    bare = measure(
        ctx, "cli: python -c pass", lambda: run_fresh([sys.executable, "-c", "pass"]).wall_s
    )
    helped = measure(ctx, "cli: gpufrag --help", lambda: timed("--help"))
    listed = measure(ctx, "cli: gpufrag sql --list", lambda: timed("sql", "--list"))
    baseline = "python -c pass"
    return [
        Figure(
            case="cli",
            name="help_s",
            unit="s",
            samples=helped,
            baseline=baseline,
            baseline_samples=bare,
            targets=(Goal(0.35),),
        ),
        Figure(
            case="cli",
            name="sql_list_s",
            unit="s",
            samples=listed,
            baseline=baseline,
            baseline_samples=bare,
            targets=(Goal(0.6),),
        ),
    ]


def inspect(ctx: Context) -> list[Figure]:
    s = ctx.scale
    # the snapshot: 2 GPU pods a node on cards, a tenth of the pods pending, the rest
    # running without GPUs (2,000 nodes: 4,000 + 2,000 pending + 14,000 = 20,000 pods)
    running, pending = 2 * s.inspect_nodes, s.inspect_pods // 10
    c = synthetic.cluster(
        seed=ctx.seed,
        nodes=s.inspect_nodes,
        running=running,
        pending=pending,
        cpu_only=s.inspect_pods - running - pending,
    )
    path = ctx.workdir / "kubectl.json"
    ctx.step("inspect: writing the snapshot")
    path.write_text(json.dumps(synthetic.kubectl_snapshot(c)), encoding="utf-8")

    def one_inspect() -> tuple[float, float]:
        return timed_with_peak("inspect", "--kube-json", str(path), "--json")

    def one_load() -> float:
        start = time.perf_counter()
        with Path(path).open("rb") as f:
            json.load(f)
        return time.perf_counter() - start

    wall, peak = measure_each(ctx, "inspect", one_inspect)
    loaded = measure(ctx, "inspect: json.load baseline", one_load)
    params = {
        "nodes": len(c.nodes),
        "pods": len(c.pods),
        "pending": pending,
        "bytes": path.stat().st_size,
    }
    return [
        Figure(
            case="inspect",
            name="wall_s",
            unit="s",
            samples=wall,
            baseline="json.load of the file",
            baseline_samples=loaded,
            targets=(Goal(2.0), Goal(3.0, of="ratio")),
            params=params,
        ),
        Figure(
            case="inspect",
            name="peak_mib",
            unit="MiB",
            samples=peak,
            targets=(Goal(300),),
            params=params,
        ),
    ]
