"""dcgm-exporter lines -> one GpuSample per GPU, or per MIG instance.

The exporter writes one line per (metric, GPU); with a GPU shared by pods (time-slicing) it
repeats the line once per pod. Lines are grouped by (node, GPU index, MIG instance); a sample
names a pod only when every line that names one names the same pod, the same whole-card rule
as the NVML sampler (one shared card's memory must not be charged to each of its pods).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from pydantic import ValidationError

from connectors.dcgm import labels as L
from connectors.dcgm.blanks import is_blank
from connectors.dcgm.exposition import ExpositionLine, Rejected, RejectKind, read_lines
from connectors.dcgm.fields import FIELDS, XID_COUNT, check
from models import GpuSample

__all__ = ["ParseResult", "TimedSample", "parse_exposition"]

Key = tuple[str, int, int | None]  # node, GPU index, MIG instance


@dataclass(frozen=True, slots=True)
class TimedSample:
    sample: GpuSample
    at: datetime
    """Scrape time, or the latest timestamp the exporter wrote on the sample's lines."""


@dataclass(frozen=True, slots=True)
class ParseResult:
    samples: list[TimedSample]
    rejected: list[Rejected]
    blanks: int
    """Values DCGM marked as blank / not supported / NaN, kept as unknown (not rejected)."""


@dataclass(slots=True)
class _Gpu:
    first_line: int
    uuid: str | None = None
    model: str | None = None
    mig_profile: str | None = None
    values: dict[str, float | int | bool | None] = field(default_factory=dict)
    xid_counts: dict[int, int] | None = None
    xid_window_ms: int | None = None
    owners: set[tuple[str | None, str, str | None]] = field(default_factory=set)
    at: datetime | None = None


def _index(line: ExpositionLine) -> int:
    raw = L.first(line.labels, "gpu")
    if raw is None:  # some exporters name the card only by its device file
        device = L.first(line.labels, "device") or ""
        raw = device.removeprefix("nvidia") if device.startswith("nvidia") else None
    if raw is None or not raw.isdigit():
        raise ValueError(f"no GPU index (gpu={raw!r})")
    return int(raw)


def _instance(line: ExpositionLine) -> int | None:
    raw = L.first(line.labels, "GPU_I_ID")
    if raw is None:
        return None
    if not raw.isdigit():
        raise ValueError(f"bad MIG instance GPU_I_ID={raw!r}")
    return int(raw)


class _Builder:
    def __init__(self, *, default_node: str | None) -> None:
        self.default_node = default_node
        self.gpus: dict[Key, _Gpu] = {}
        self.rejected: list[Rejected] = []
        self.blanks = 0

    def add(self, line: ExpositionLine) -> None:
        spec = FIELDS.get(line.name)
        if spec is None and line.name != XID_COUNT:
            return  # a metric no sample field needs (clocks, power, NVLink, ...)
        node = L.first(line.labels, L.NODE) or self.default_node
        if node is None:
            self._reject(line, "labels", "no Hostname label and no default node given")
            return
        try:
            key = (node, _index(line), _instance(line))
        except ValueError as exc:
            self._reject(line, "labels", str(exc))
            return
        if is_blank(line.value):
            self.blanks += 1
            self._gpu(key, line)
            return
        try:
            if spec is None:
                self._xid_count(key, line)
                return
            value = check(spec.kind, line.value)
        except ValueError as exc:
            self._reject(line, "value", str(exc))
            return
        self._gpu(key, line).values[spec.slot] = value

    def _xid_count(self, key: Key, line: ExpositionLine) -> None:
        count = check("count", line.value)
        xid = L.first(line.labels, "xid")
        window = L.first(line.labels, "window_size_in_ms")
        if xid is not None and not xid.isdigit():
            raise ValueError(f"bad xid label {xid!r}")
        if window is not None and not window.isdigit():
            raise ValueError(f"bad window_size_in_ms label {window!r}")
        gpu = self._gpu(key, line)
        counts = gpu.xid_counts if gpu.xid_counts is not None else {}
        if xid is not None and count:
            counts[int(xid)] = int(count)
        gpu.xid_counts = counts  # a line without xid (value 0): the exporter saw none
        if window is not None and int(window) > 0:
            gpu.xid_window_ms = int(window)

    def _gpu(self, key: Key, line: ExpositionLine) -> _Gpu:
        gpu = self.gpus.get(key)
        if gpu is None:
            gpu = self.gpus[key] = _Gpu(first_line=line.line_no)
        labels = line.labels
        gpu.uuid = gpu.uuid or L.first(labels, L.UUID)
        gpu.model = gpu.model or L.first(labels, "modelName")
        gpu.mig_profile = gpu.mig_profile or L.first(labels, "GPU_I_PROFILE")
        owner = L.owner(labels)
        if owner is not None:
            gpu.owners.add(owner)
        if line.timestamp is not None and (gpu.at is None or line.timestamp > gpu.at):
            gpu.at = line.timestamp
        return gpu

    def _reject(self, line: ExpositionLine, kind: RejectKind, reason: str) -> None:
        self.rejected.append(Rejected(line.line_no, kind, f"{line.name}: {reason}"))

    def samples(self, scraped_at: datetime) -> list[TimedSample]:
        out: list[TimedSample] = []
        for (node, index, instance), gpu in self.gpus.items():
            v = gpu.values
            owner = next(iter(gpu.owners)) if len(gpu.owners) == 1 else None
            try:
                sample = GpuSample(
                    node=node,
                    gpu_index=index,
                    uuid=gpu.uuid,
                    model=gpu.model,
                    memory_total_mib=_total(v),
                    memory_used_mib=_float(v.get("used")),
                    memory_reserved_mib=_float(v.get("reserved")),
                    utilization_pct=_float(v.get("utilization_pct")),
                    engine_active=_float(v.get("engine_active")),
                    xid=_int(v.get("xid")),
                    mig_profile=gpu.mig_profile if instance is not None else None,
                    mig_instance=instance,
                    namespace=owner[0] if owner else None,
                    pod=owner[1] if owner else None,
                    container=owner[2] if owner else None,
                    xid_counts=gpu.xid_counts,
                    xid_window_ms=gpu.xid_window_ms,
                    rows_remapped_correctable=_int(v.get("rows_remapped_correctable")),
                    rows_remapped_uncorrectable=_int(v.get("rows_remapped_uncorrectable")),
                    row_remap_pending=_bool(v.get("row_remap_pending")),
                    row_remap_failed=_bool(v.get("row_remap_failed")),
                )
            except ValidationError as exc:
                where = f"GPU {index}" + (f" instance {instance}" if instance is not None else "")
                problem = "; ".join(e["msg"] for e in exc.errors())
                self.rejected.append(Rejected(gpu.first_line, "value", f"{where}: {problem}"))
                continue
            out.append(TimedSample(sample, gpu.at or scraped_at))
        return out


def _float(value: float | int | bool | None) -> float | None:
    return None if value is None else float(value)


def _int(value: float | int | bool | None) -> int | None:
    return None if value is None else int(value)


def _bool(value: float | int | bool | None) -> bool | None:
    return None if value is None else bool(value)


def _total(v: dict[str, float | int | bool | None]) -> float | None:
    """DCGM's FB_TOTAL when exported; else used + free + reserved (DCGM's "used" leaves the
    driver's reservation out). Without the reservation the sum would understate the card, so
    the total stays unknown rather than guessed."""
    if v.get("total") is not None:
        return _float(v["total"])
    parts = [v.get("used"), v.get("free"), v.get("reserved")]
    if any(p is None for p in parts):
        return None
    return sum(float(p) for p in parts if p is not None)


def parse_exposition(
    data: bytes | str, *, scraped_at: datetime, default_node: str | None = None
) -> ParseResult:
    """Samples from one dcgm-exporter page. ``default_node`` names the node for lines without
    a ``Hostname`` label (exporters started with ``--no-hostname``, or a page saved from one
    node); bad lines are returned as rejected, and the rest still make samples."""
    builder = _Builder(default_node=default_node)
    rejected: list[Rejected] = []
    for item in read_lines(data):
        if isinstance(item, Rejected):
            rejected.append(item)
        else:
            builder.add(item)
    samples = builder.samples(scraped_at)
    rejected.extend(builder.rejected)
    rejected.sort(key=lambda r: r.line_no)
    return ParseResult(samples=samples, rejected=rejected, blanks=builder.blanks)
