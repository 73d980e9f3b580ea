"""Pod shapes and the typical-pod distribution the FGD measure is taken against.

The measure in "Beware of Fragmentation" (Weng et al., USENIX ATC '23) asks, for each node, how
much idle GPU the *expected* workload could not use. The expected workload is the set of most
frequent request shapes covering a share of all pods (95 % by default), each weighted by its
frequency.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

MILLI_PER_GPU = 1000
DEFAULT_COVERAGE = 0.95


@dataclass(frozen=True, slots=True)
class PodShape:
    """What a pod asks for, as far as fragmentation is concerned (memory does not enter it)."""

    cpu_milli: int
    gpu_milli: int  # per GPU; 1000 for whole cards, 0 for CPU-only pods
    gpu_count: int  # cards, or MIG instances when ``mig`` names a profile
    gpu_models: str = ""  # allowed models joined by "|"; "" means any model
    mig: str = ""
    """A MIG profile: the pod fits only a free instance of it (``gpu_milli`` is then its
    nominal share of a 7-slice card, for ordering and totals)."""
    gpu_memory_mib: int = 0
    """HAMi memory cap per card; 0: none asked (HAMi then gives the whole card's memory, or
    ``gpu_memory_pct`` of it)."""
    gpu_memory_pct: int = 0
    hami: bool = False
    """Asks for HAMi's per-card limits: only HAMi's cards serve it."""
    cores_milli: int = -1
    """HAMi core share per card in milli; -1: none asked (HAMi then reserves no cores)."""

    @property
    def total_gpu_milli(self) -> int:
        return self.gpu_milli * self.gpu_count

    @property
    def is_shared_gpu(self) -> bool:
        return self.gpu_count == 1 and self.gpu_milli < MILLI_PER_GPU

    def accepts_model(self, model: str | None) -> bool:
        """A pod naming no model runs anywhere; one naming models needs one of them."""
        allowed = [m for m in self.gpu_models.split("|") if m]
        if not allowed:
            return True
        return model is not None and model in allowed

    def sort_key(self) -> tuple[int, int, int, str, str, int, int, int]:
        return (
            self.cpu_milli,
            self.gpu_milli,
            self.gpu_count,
            self.gpu_models,
            self.mig,
            self.gpu_memory_mib,
            self.cores_milli,
            self.gpu_memory_pct,
        )


@dataclass(frozen=True, slots=True)
class TypicalPod:
    shape: PodShape
    freq: float  # share among the typical pods; the freqs sum to 1


@dataclass(frozen=True, slots=True)
class TypicalPods:
    """The expected workload: most frequent shapes until ``coverage`` of pods is reached."""

    pods: tuple[TypicalPod, ...]
    coverage: float
    observed_pods: int

    def __len__(self) -> int:
        return len(self.pods)

    @classmethod
    def from_counts(
        cls, counts: Mapping[PodShape, int], *, coverage: float = DEFAULT_COVERAGE
    ) -> TypicalPods:
        if not 0.0 < coverage <= 1.0:
            raise ValueError(f"coverage must be in (0, 1], got {coverage}")
        total = sum(counts.values())
        if total <= 0:
            return cls(pods=(), coverage=coverage, observed_pods=0)
        # Most frequent first; equal counts go by the larger shape first, so the choice at the
        # coverage cut is deterministic (the reference simulator orders them the same way).
        ranked = sorted(counts.items(), key=lambda kv: (kv[1], kv[0].sort_key()), reverse=True)
        wanted = coverage * total
        chosen: list[tuple[PodShape, int]] = []
        covered = 0
        for shape, n in ranked:
            if covered >= wanted:
                break
            chosen.append((shape, n))
            covered += n
        pods = tuple(TypicalPod(shape=s, freq=n / covered) for s, n in chosen)
        return cls(pods=pods, coverage=coverage, observed_pods=total)

    @classmethod
    def from_shapes(
        cls, shapes: Iterable[PodShape], *, coverage: float = DEFAULT_COVERAGE
    ) -> TypicalPods:
        return cls.from_counts(Counter(shapes), coverage=coverage)


class ShapeCounter:
    """Counts the shapes seen so far, so the typical pods follow the observed workload."""

    def __init__(self, *, coverage: float = DEFAULT_COVERAGE) -> None:
        self._counts: Counter[PodShape] = Counter()
        self._coverage = coverage
        self._cached: TypicalPods | None = None

    def observe(self, shape: PodShape) -> None:
        self._counts[shape] += 1
        self._cached = None

    @property
    def counts(self) -> Mapping[PodShape, int]:
        return self._counts

    def typical(self) -> TypicalPods:
        if self._cached is None:
            self._cached = TypicalPods.from_counts(self._counts, coverage=self._coverage)
        return self._cached
