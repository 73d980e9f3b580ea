"""Reader for the published per-seed result tables of the FGD paper's simulator.

Used only to print published figures *beside* ours (``gpufrag experiment --published``); nothing
in gpufrag computes from them. The directory holds one CSV per metric with the columns
``workload,sc_policy,tune,seed,[total_gpus,]0,1,...,130``. A file that cannot be read as
such (too large, not UTF-8, not CSV, a value that is not a finite number) is a
PublishedResultsError naming it, never an exception from the csv or codecs modules.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

from models.settings import TraceSettings

# Which file holds which metric, by a fragment of its name.
METRIC_FILES = {
    "alloc_pct": "_allo_",
    "frag_ratio_pct": "_frag_ratio_",
    "frag_amount_pct": "_frag_discrete",
}
# The simulator's policy labels for gpufrag's policy names.
POLICY_LABELS = {
    "random": "01-Random",
    "dot-product": "02-DotProd",
    "gpu-clustering": "03-GpuClustering",
    "gpu-packing": "04-GpuPacking",
    "best-fit": "05-BestFit",
    "fgd": "06-FGD",
}


class PublishedResultsError(ValueError):
    """The published-results directory cannot answer the question asked of it."""


@dataclass(frozen=True, slots=True)
class PublishedCurve:
    levels: tuple[int, ...]
    alloc_pct: tuple[float, ...]
    frag_amount_pct: tuple[float, ...]
    frag_ratio_pct: tuple[float, ...]
    seeds: tuple[int, ...]


def _metric_file(directory: Path, fragment: str) -> Path:
    hits = sorted(p for p in directory.glob("*.csv") if fragment in p.name)
    if len(hits) != 1:
        raise PublishedResultsError(
            f"{directory}: expected one CSV whose name contains {fragment!r}, found {len(hits)}"
        )
    return hits[0]


def _mean_rows(
    path: Path, workload: str, label: str, seeds: set[int], ratio: float, max_bytes: int
) -> tuple[list[float], list[int]]:
    size = path.stat().st_size
    if size > max_bytes:
        raise PublishedResultsError(
            f"{path.name}: {size} bytes, over the {max_bytes}-byte limit "
            "(GPUFRAG_TRACE__MAX_FILE_BYTES)"
        )
    try:
        return _read_means(path, workload, label, seeds, ratio)
    except UnicodeDecodeError as exc:
        raise PublishedResultsError(f"{path.name}: not valid UTF-8: {exc.reason}") from None
    except csv.Error as exc:
        raise PublishedResultsError(f"{path.name}: malformed CSV: {exc}") from None


def _read_means(
    path: Path, workload: str, label: str, seeds: set[int], ratio: float
) -> tuple[list[float], list[int]]:
    with path.open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        header = reader.fieldnames or []
        missing = [c for c in ("workload", "sc_policy", "tune", "seed") if c not in header]
        if missing:
            raise PublishedResultsError(f"{path.name}: missing columns {missing}")
        levels = [c for c in header if c.isdigit()]
        if levels != [str(i) for i in range(len(levels))] or not levels:
            raise PublishedResultsError(f"{path.name}: level columns must be 0, 1, 2, ...")
        sums = [0.0] * len(levels)
        used: list[int] = []
        for row in reader:
            line = reader.line_num
            if row["workload"] != workload or row["sc_policy"] != label:
                continue
            try:
                tune = float(row["tune"])
                seed = int(row["seed"])
            except (TypeError, ValueError):
                raise PublishedResultsError(f"{path.name}:{line}: bad tune or seed") from None
            if seed not in seeds or not math.isfinite(tune) or not math.isclose(tune, ratio):
                continue
            if seed in used:
                raise PublishedResultsError(f"{path.name}:{line}: seed {seed} appears twice")
            used.append(seed)
            for i, level in enumerate(levels):
                try:
                    value = float(row[level])
                except (TypeError, ValueError):
                    value = math.nan
                if not math.isfinite(value):  # 'nan' and '1e999' are floats, not figures
                    raise PublishedResultsError(
                        f"{path.name}:{line}: column {level!r}: not a finite number: "
                        f"{str(row[level])[:40]!r}"
                    )
                sums[i] += value
    lacking = sorted(seeds - set(used))
    if lacking:
        raise PublishedResultsError(
            f"{path.name}: no published row for workload {workload!r}, policy {label!r}, "
            f"ratio {ratio}, seeds {lacking}; compare only seeds that were published"
        )
    return [s / len(used) for s in sums], sorted(used)


def read_published(
    directory: Path,
    *,
    workload: str,
    policy: str,
    seeds: set[int],
    ratio: float = 1.3,
    settings: TraceSettings | None = None,
) -> PublishedCurve:
    """Means over the requested seeds of each published metric, per arrived-demand level;
    ``settings`` gives the file size cap (the trace's)."""
    max_bytes = (settings or TraceSettings()).max_file_bytes
    if not directory.is_dir():
        raise PublishedResultsError(f"{directory}: not a directory")
    label = POLICY_LABELS.get(policy)
    if label is None:
        raise PublishedResultsError(f"no published results for policy {policy!r}")
    curves: dict[str, list[float]] = {}
    used: list[int] = []
    for metric, fragment in METRIC_FILES.items():
        curves[metric], used = _mean_rows(
            _metric_file(directory, fragment), workload, label, seeds, ratio, max_bytes
        )
    n = len(curves["alloc_pct"])
    if any(len(c) != n for c in curves.values()):
        raise PublishedResultsError(f"{directory}: the metric files cover different levels")
    return PublishedCurve(
        levels=tuple(range(n)),
        alloc_pct=tuple(curves["alloc_pct"]),
        frag_amount_pct=tuple(curves["frag_amount_pct"]),
        frag_ratio_pct=tuple(curves["frag_ratio_pct"]),
        seeds=tuple(used),
    )
