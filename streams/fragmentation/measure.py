"""The FGD fragmentation measure of one node, memoised by node state.

For each typical pod: if the node can host it (GPU model, enough GPUs with room, CPU), the idle
GPU on cards too small for its per-GPU share is fragment; otherwise all the node's idle GPU is.
CPU-only typical pods cannot use GPU at all, so for them every idle GPU counts. The node's
fragment is the frequency-weighted sum, in milli-GPU.

The value depends only on (GPU model, free CPU, multiset of free GPU shares), and a cluster shows
few distinct such states, so a memo keyed by the state makes the cost per placement change a
dictionary lookup, independent of cluster size.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from streams.fragmentation.shapes import TypicalPods

NodeState = tuple[str | None, int, tuple[int, ...]]
"""(GPU model, free milli-CPU, free milli-GPU per card sorted high to low)."""


def node_state(gpu_model: str | None, cpu_free_milli: int, gpu_free: Sequence[int]) -> NodeState:
    return (gpu_model, int(cpu_free_milli), tuple(sorted((int(g) for g in gpu_free), reverse=True)))


@dataclass(frozen=True, slots=True)
class NodeFragment:
    """A node's fragment and the idle GPU it is part of, in milli-GPU."""

    frag_milli: float
    idle_milli: int


def node_fragment(state: NodeState, typical: TypicalPods) -> NodeFragment:
    """Compute a node's fragment from scratch (the memo in FragMeasure calls this once a state)."""
    model, cpu_free, gpus = state
    idle = sum(gpus)
    if idle == 0:
        return NodeFragment(0.0, 0)
    frag = 0.0
    for tp in typical.pods:
        shape = tp.shape
        if shape.gpu_milli == 0 or not shape.accepts_model(model) or cpu_free < shape.cpu_milli:
            frag += tp.freq * idle
            continue
        fitting = sum(1 for g in gpus if g >= shape.gpu_milli)
        if fitting < shape.gpu_count:
            frag += tp.freq * idle
        else:
            frag += tp.freq * sum(g for g in gpus if g < shape.gpu_milli)
    return NodeFragment(frag, idle)


class FragMeasure:
    """Memoised node fragments for one typical-pod distribution."""

    def __init__(self, typical: TypicalPods) -> None:
        self.typical = typical
        self._memo: dict[NodeState, float] = {}

    def frag_milli(self, state: NodeState) -> float:
        value = self._memo.get(state)
        if value is None:
            value = node_fragment(state, self.typical).frag_milli
            self._memo[state] = value
        return value

    @property
    def distinct_states(self) -> int:
        return len(self._memo)
