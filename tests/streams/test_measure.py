"""The FGD measure of one node, checked against values worked out by hand."""

from __future__ import annotations

import pytest

from streams.fragmentation.measure import FragMeasure, node_fragment, node_state
from streams.fragmentation.shapes import PodShape, TypicalPod, TypicalPods

SHARED_HALF = PodShape(cpu_milli=4000, gpu_milli=500, gpu_count=1)
TWO_WHOLE = PodShape(cpu_milli=8000, gpu_milli=1000, gpu_count=2)
CPU_ONLY = PodShape(cpu_milli=2000, gpu_milli=0, gpu_count=0)
TYPICAL = TypicalPods(
    pods=(
        TypicalPod(SHARED_HALF, 0.5),
        TypicalPod(TWO_WHOLE, 0.3),
        TypicalPod(CPU_ONLY, 0.2),
    ),
    coverage=1.0,
    observed_pods=10,
)


@pytest.mark.parametrize(
    ("cpu_free", "gpus", "model", "typical", "expected"),
    [
        # idle 2300. shared: fits, card of 300 < 500 is fragment -> .5*300; two whole: fits,
        # the 300 card is fragment -> .3*300; CPU-only: all idle -> .2*2300.
        (10_000, (1000, 1000, 300, 0), "T4", TYPICAL, 150 + 90 + 460),
        # 6000 CPU free: the 2-GPU pod lacks CPU, so all idle counts for it: .3*2300.
        (6_000, (1000, 1000, 300, 0), "T4", TYPICAL, 150 + 690 + 460),
        # 3000 CPU free: both GPU shapes lack CPU.
        (3_000, (1000, 1000, 300, 0), "T4", TYPICAL, 1150 + 690 + 460),
        # one whole card left: the 2-GPU shape lacks GPUs; the shared one wastes nothing.
        (10_000, (1000, 0), "T4", TYPICAL, 0 + 300 + 200),
        # a full node has no idle GPU and no fragment.
        (10_000, (0, 0), "T4", TYPICAL, 0),
    ],
)
def test_node_fragment_by_hand(
    cpu_free: int, gpus: tuple[int, ...], model: str, typical: TypicalPods, expected: float
) -> None:
    frag = node_fragment(node_state(model, cpu_free, gpus), typical)
    assert frag.frag_milli == pytest.approx(expected)
    assert frag.idle_milli == sum(gpus)


def test_gpu_model_constraint_makes_all_idle_fragment() -> None:
    only_v100 = PodShape(cpu_milli=1000, gpu_milli=500, gpu_count=1, gpu_models="V100M16|V100M32")
    typical = TypicalPods(pods=(TypicalPod(only_v100, 1.0),), coverage=1.0, observed_pods=1)
    on_t4 = node_fragment(node_state("T4", 10_000, (1000, 700)), typical)
    on_v100 = node_fragment(node_state("V100M32", 10_000, (1000, 300)), typical)
    assert on_t4.frag_milli == pytest.approx(1700)
    assert on_v100.frag_milli == pytest.approx(300)


def test_memo_returns_same_value_for_any_card_order() -> None:
    measure = FragMeasure(TYPICAL)
    a = measure.frag_milli(node_state("T4", 10_000, (300, 1000, 0, 1000)))
    b = measure.frag_milli(node_state("T4", 10_000, (1000, 0, 1000, 300)))
    assert a == b == pytest.approx(700)
    assert measure.distinct_states == 1


def test_typical_pods_cover_the_requested_share_most_frequent_first() -> None:
    big = PodShape(16000, 1000, 8)
    small = PodShape(1000, 200, 1)
    tie_a = PodShape(2000, 0, 0)
    tie_b = PodShape(3000, 0, 0)
    typical = TypicalPods.from_counts({small: 5, big: 3, tie_a: 1, tie_b: 1}, coverage=0.8)
    assert [tp.shape for tp in typical.pods] == [small, big]
    assert [tp.freq for tp in typical.pods] == [5 / 8, 3 / 8]
    # at 90 % one of the tied shapes is needed; the larger one is taken, as the simulator does.
    typical = TypicalPods.from_counts({small: 5, big: 3, tie_a: 1, tie_b: 1}, coverage=0.9)
    assert [tp.shape for tp in typical.pods] == [small, big, tie_b]
    assert sum(tp.freq for tp in typical.pods) == pytest.approx(1.0)


def test_typical_pods_reject_bad_coverage() -> None:
    with pytest.raises(ValueError, match="coverage"):
        TypicalPods.from_counts({CPU_ONLY: 1}, coverage=0.0)
