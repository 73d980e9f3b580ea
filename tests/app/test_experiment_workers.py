"""`gpufrag experiment --workers`: seeds spread over processes give the serial run's curves."""

from __future__ import annotations

import subprocess
import sys

from streams.app.commands.experiment_seeds import default_workers, seed_curves
from streams.fragmentation.shapes import PodShape, TypicalPods
from streams.placement.spec import NodeSpec, PodSpec

NODES = [
    NodeSpec(f"n{i}", 32_000, 131_072, 1 + i % 4, "T4" if i % 3 else "V100") for i in range(12)
]
SHAPES = [
    PodShape(2000, 500, 1),
    PodShape(4000, 1000, 1),
    PodShape(8000, 1000, 2, gpu_models="T4"),
    PodShape(1000, 250, 1),
    PodShape(6000, 0, 0),
]
PODS = [PodSpec(f"p{k}", SHAPES[k * 7 % len(SHAPES)], 4096) for k in range(40)]


def curves(workers: int, done: list[int]) -> list[object]:
    return list(
        seed_curves(
            NODES,
            PODS,
            policy="fgd",
            seeds=[3, 1, 2],
            typical=TypicalPods.from_shapes(p.shape for p in PODS),
            ratio=1.3,
            workers=workers,
            done=lambda: done.append(1),
        )
    )


def test_two_workers_give_the_serial_curves_in_seed_order() -> None:
    serial: list[int] = []
    pooled: list[int] = []
    one = curves(1, serial)
    two = curves(2, pooled)
    assert repr(two) == repr(one)  # every float to the last bit, the NaN of unreached levels too
    assert len({c.alloc_pct for c in one}) == 3, "three seeds, three different runs"
    assert len(serial) == len(pooled) == 3


def test_default_workers_is_at_least_one() -> None:
    assert default_workers() >= 1


def test_zero_workers_is_a_usage_error() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "streams.app", "experiment", "--policy", "fgd", "--workers", "0"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 2 and "--workers" in out.stderr
