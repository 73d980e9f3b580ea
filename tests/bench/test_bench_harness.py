"""The runner's warm-up and repeats, the case registry, and the seeded generator."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from models import Envelope
from streams.app.bench import synthetic
from streams.app.bench.registry import CASES, chosen
from streams.app.bench.runner import SCALES, Context, measure, measure_each


def _ctx(tmp_path: Path, steps: list[str], *, warmup: int, runs: int) -> Context:
    scale = dataclasses.replace(SCALES["small"], warmup=warmup, runs=runs)
    return Context(scale=scale, seed=1, workdir=tmp_path, kafka=None, step=steps.append)


def test_the_warm_up_runs_are_not_in_the_samples(tmp_path: Path) -> None:
    values: Iterator[float] = iter([100.0, 1.0, 2.0, 3.0])
    steps: list[str] = []
    samples = measure(_ctx(tmp_path, steps, warmup=1, runs=3), "c", lambda: next(values))
    assert samples.values == (1.0, 2.0, 3.0)
    assert steps == ["c: warm-up", "c: run 1/3", "c: run 2/3", "c: run 3/3"]


def test_a_sample_of_several_figures_gives_one_series_each(tmp_path: Path) -> None:
    pairs = iter([(9.0, 90.0), (1.0, 10.0), (2.0, 20.0)])
    wall, peak = measure_each(_ctx(tmp_path, [], warmup=1, runs=2), "c", lambda: next(pairs))
    assert wall.values == (1.0, 2.0) and peak.values == (10.0, 20.0)


def test_the_registry_has_every_case_of_the_issue_and_each_loads() -> None:
    names = {
        "replay",
        "cli",
        "ingest",
        "kafka",
        "latency",
        "view",
        "inspect",
        "experiment",
        "memory",
        "sink",
        "extender",
    }
    assert set(CASES) == names
    for case in CASES.values():
        assert callable(case.load())


def test_cases_are_chosen_in_the_registrys_order_and_a_wrong_name_is_refused() -> None:
    assert [c.name for c in chosen(["view", "cli"])] == ["cli", "view"]
    assert [c.name for c in chosen([])] == list(CASES)
    with pytest.raises(ValueError, match="unknown case vew; the cases are: cli, view"):
        chosen(["vew"])


def _everything(seed: int) -> bytes:
    c = synthetic.cluster(seed=seed, nodes=40, running=80, pending=10, cpu_only=20)
    events = [
        *synthetic.state_events(c),
        *synthetic.live_events(c, seed=seed, count=200, first_seq=0),
    ]
    return orjson.dumps([events, synthetic.kubectl_snapshot(c)])


def test_one_seed_gives_the_same_cluster_and_load_and_another_seed_another() -> None:
    assert _everything(3) == _everything(3)
    assert _everything(3) != _everything(4)


def test_the_generated_cluster_has_the_sizes_asked_and_binds_no_card_twice() -> None:
    c = synthetic.cluster(seed=5, nodes=100, running=150, pending=20, cpu_only=30)
    assert len(c.nodes) == 100 and len(c.pending) == 20
    assert len([p for p in c.pods if p.gpus == 0]) == 30
    cards = [(p.node, i) for p in c.pods for i in p.gpu_indices]
    assert len(cards) == len(set(cards))
    counts = {n.name: n.gpu_count for n in c.nodes}
    assert all(i < counts[node] for node, i in cards if node is not None)


def test_the_generated_events_pass_the_edge_validation() -> None:
    # the ingest case times valid events: a refused one would flatter the figure
    c = synthetic.cluster(seed=2, nodes=20, running=30, pending=5, cpu_only=5)
    raw = [*synthetic.state_events(c), *synthetic.live_events(c, seed=2, count=300, first_seq=100)]
    envs = [Envelope.model_validate(e) for e in raw]
    kinds = {e.kind.value for e in envs}
    assert kinds == {"node", "pod", "gpu_sample", "scheduler"}
    times = [e.event_time for e in envs]
    assert times == sorted(times)
    faulted = synthetic.faulted_sample_payload(c.nodes[0], 0)
    assert (
        Envelope.model_validate(synthetic.envelope(faulted, seq=0, at_s=1.0)).kind == "gpu_sample"
    )
