"""Cluster state as arrays, so that a pod's fit is checked against every node at once.

Each node's FGD fragment is kept current on every bind/unbind (one memo lookup), so the cluster's
fragmentation is available after every placement at a cost that does not grow with cluster size.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from streams.fragmentation.measure import FragMeasure, LegacyState, node_state
from streams.fragmentation.shapes import MILLI_PER_GPU, PodShape
from streams.placement.spec import NodeSpec, PodSpec

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
FloatArray = npt.NDArray[np.float64]


def gpu_tag(shape: PodShape) -> int | None:
    """The simulator's GPU affinity of a pod, as a column of ``SimCluster.tag_pods``: 0 for a
    share of one card, k for k whole cards, None for a pod without GPUs."""
    if shape.gpu_count == 0 or shape.gpu_milli == 0:
        return None
    return 0 if shape.gpu_milli < MILLI_PER_GPU else shape.gpu_count


class PlacementError(ValueError):
    """A bind or unbind that would break a node's resource accounting."""


class SimCluster:
    """Free resources per node and the fragmentation they amount to."""

    def __init__(
        self,
        nodes: Sequence[NodeSpec],
        *,
        measure: FragMeasure,
        tie_rank: IntArray | None = None,
    ) -> None:
        if not nodes:
            raise ValueError("a simulated cluster needs at least one node")
        names = [n.name for n in nodes]
        if len(set(names)) != len(names):
            raise ValueError("node names must be unique")
        n = len(nodes)
        width = max(1, max(spec.gpu_count for spec in nodes))
        self.nodes = tuple(nodes)
        self.names = names
        self.index = {name: i for i, name in enumerate(names)}
        self.measure = measure
        self.cpu_capacity: IntArray = np.array([s.cpu_milli for s in nodes], dtype=np.int64)
        self.mem_capacity: IntArray = np.array([s.memory_mib for s in nodes], dtype=np.int64)
        self.gpu_count: IntArray = np.array([s.gpu_count for s in nodes], dtype=np.int64)
        self.cpu_free: IntArray = self.cpu_capacity.copy()
        self.mem_free: IntArray = self.mem_capacity.copy()
        self.gpu_free: IntArray = np.zeros((n, width), dtype=np.int64)
        for i, spec in enumerate(nodes):
            self.gpu_free[i, : spec.gpu_count] = MILLI_PER_GPU
        self.gpu_desc: IntArray = self.gpu_free.copy()
        """Each node's free GPU shares sorted high to low (0 past its cards): a node has k
        cards with room for m exactly when column k-1 is at least m, one compare per node
        instead of a row sum over all cards in ``feasible``."""
        self.models: list[str | None] = [s.gpu_model for s in nodes]
        self.tag_pods: IntArray = np.zeros((n, width + 1), dtype=np.int64)
        """Pods bound per node by GPU tag (``gpu_tag``): what GPU-clustering scores by."""
        self.tie_rank: IntArray = (
            np.arange(n, dtype=np.int64) if tie_rank is None else np.asarray(tie_rank, np.int64)
        )
        if self.tie_rank.shape != (n,):
            raise ValueError("tie_rank needs one entry per node")
        self.capacity_milli = int(self.gpu_count.sum()) * MILLI_PER_GPU
        self.allocated_milli = 0
        self.changed_at: IntArray = np.zeros(n, dtype=np.int64)
        self.step = 0
        self._model_masks: dict[str, BoolArray] = {}
        self._state_ids: dict[LegacyState, int] = {}
        self.states: list[LegacyState] = []
        self.state_id: IntArray = np.zeros(n, dtype=np.int64)
        self.node_frag: FloatArray = np.zeros(n, dtype=np.float64)
        self.frag_milli = 0.0
        for i in range(n):
            self._refresh(i)

    # --- reading -------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.names)

    @property
    def idle_milli(self) -> int:
        return self.capacity_milli - self.allocated_milli

    def gpus_of(self, i: int) -> IntArray:
        return self.gpu_free[i, : int(self.gpu_count[i])]

    def state_of(self, i: int) -> LegacyState:
        return self.states[int(self.state_id[i])]

    def model_mask(self, gpu_models: str) -> BoolArray:
        mask = self._model_masks.get(gpu_models)
        if mask is None:
            allowed = {m for m in gpu_models.split("|") if m}
            mask = np.array([(not allowed) or (m in allowed) for m in self.models], dtype=bool)
            self._model_masks[gpu_models] = mask
        return mask

    def feasible(self, pod: PodSpec) -> BoolArray:
        """Nodes passing every filter: CPU, memory, GPU model, and enough GPUs with room."""
        shape = pod.shape
        ok: BoolArray = (self.cpu_free >= shape.cpu_milli) & (self.mem_free >= pod.memory_mib)
        if shape.gpu_count > 0:
            ok &= self.model_mask(shape.gpu_models)
            ok &= self.gpus_fit(shape.gpu_milli, shape.gpu_count)
        return ok

    def gpus_fit(self, milli: int, count: int) -> BoolArray:
        """Nodes with at least ``count`` cards with ``milli`` free (the zero padding past a
        node's cards counts as in ``(gpu_free >= milli).sum(axis=1) >= count``)."""
        if count <= 0:
            return np.ones(len(self.names), dtype=bool)
        if count > self.gpu_desc.shape[1]:
            return np.zeros(len(self.names), dtype=bool)
        fit: BoolArray = self.gpu_desc[:, count - 1] >= milli
        return fit

    def recompute_frag_milli(self) -> float:
        """The cluster fragment summed afresh, to check the running total against."""
        return float(sum(self.measure.frag_milli(self.state_of(i)) for i in range(len(self.names))))

    # --- changing --------------------------------------------------------------------------

    def bind(self, i: int, pod: PodSpec, gpu_ids: Sequence[int]) -> None:
        shape = pod.shape
        self._check_gpu_ids(i, shape.gpu_count, gpu_ids)
        if self.cpu_free[i] < shape.cpu_milli or self.mem_free[i] < pod.memory_mib:
            raise PlacementError(f"{pod.name} does not fit CPU/memory of {self.names[i]}")
        for g in gpu_ids:
            if self.gpu_free[i, g] < shape.gpu_milli:
                raise PlacementError(f"{pod.name} does not fit GPU {g} of {self.names[i]}")
        self.cpu_free[i] -= shape.cpu_milli
        self.mem_free[i] -= pod.memory_mib
        for g in gpu_ids:
            self.gpu_free[i, g] -= shape.gpu_milli
        self.allocated_milli += shape.gpu_milli * len(gpu_ids)
        if (tag := gpu_tag(shape)) is not None:
            self.tag_pods[i, tag] += 1
        self._refresh(i)

    def unbind(self, i: int, pod: PodSpec, gpu_ids: Sequence[int]) -> None:
        shape = pod.shape
        self._check_gpu_ids(i, shape.gpu_count, gpu_ids)
        if (
            self.cpu_free[i] + shape.cpu_milli > self.cpu_capacity[i]
            or self.mem_free[i] + pod.memory_mib > self.mem_capacity[i]
            or any(self.gpu_free[i, g] + shape.gpu_milli > MILLI_PER_GPU for g in gpu_ids)
        ):
            raise PlacementError(f"{pod.name} was not bound to {self.names[i]}")
        self.cpu_free[i] += shape.cpu_milli
        self.mem_free[i] += pod.memory_mib
        for g in gpu_ids:
            self.gpu_free[i, g] += shape.gpu_milli
        self.allocated_milli -= shape.gpu_milli * len(gpu_ids)
        if (tag := gpu_tag(shape)) is not None:
            self.tag_pods[i, tag] -= 1
        self._refresh(i)

    def _check_gpu_ids(self, i: int, count: int, gpu_ids: Sequence[int]) -> None:
        if len(gpu_ids) != count or len(set(gpu_ids)) != count:
            raise PlacementError(f"need {count} distinct GPU ids, got {list(gpu_ids)}")
        if any(not 0 <= g < int(self.gpu_count[i]) for g in gpu_ids):
            raise PlacementError(f"GPU ids {list(gpu_ids)} outside node {self.names[i]}")

    def _refresh(self, i: int) -> None:
        state = node_state(self.models[i], int(self.cpu_free[i]), self.gpus_of(i).tolist())
        sid = self._state_ids.get(state)
        if sid is None:
            sid = len(self.states)
            self._state_ids[state] = sid
            self.states.append(state)
        self.state_id[i] = sid
        self.gpu_desc[i, : len(state[2])] = state[2]
        frag = self.measure.frag_milli(state)
        self.frag_milli += frag - float(self.node_frag[i])
        self.node_frag[i] = frag
        self.step += 1
        self.changed_at[i] = self.step
