"""dcgm-exporter lines -> one GpuSample per GPU, or per MIG instance.

The exporter writes one line per (metric, GPU); with a GPU shared by pods (time-slicing) it
repeats the line once per pod, with the card's one value. Lines are grouped by (node, GPU index,
MIG instance); a sample names a pod only when every line that names one names the same pod, the
same whole-card rule as the NVML sampler (one shared card's memory must not be charged to each
of its pods).

Every line ends up in exactly one of three places: a sample (``TimedSample.lines``), a refusal
(``Rejected``, with its reason), or ``ignored`` (a metric no sample field needs). A line is
refused on its own where it can be (labels, range, timestamp); lines that disagree (two values
for one GPU and metric) are refused together, and the rest of the GPU's lines still make its
sample; only a sample impossible as a whole (used above total) costs the GPU's lines.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from pydantic import ValidationError

from connectors.dcgm import labels as L
from connectors.dcgm.blanks import is_blank
from connectors.dcgm.checks import Key, Refuse, bounded, gpu_key, kind_of, label_int, line_time
from connectors.dcgm.exposition import ExpositionLine, Rejected, RejectKind, clip, read_lines
from connectors.dcgm.fields import FIELDS, XID_COUNT, check
from models import GpuSample
from models.bounds import describe
from models.settings import DcgmSettings

__all__ = ["REFUSED_LINES_MAX", "ParseResult", "TimedSample", "parse_exposition"]

Value = float | int | bool | None
Series = tuple[str, str]
"""(metric, xid label): what must hold one value per GPU. The exporter's window is a series of
its own (``window_size_in_ms``), written on every XID-count line of the GPU."""
WINDOW = "window_size_in_ms"
MIN_TIMESTAMP = DcgmSettings().min_timestamp


@dataclass(frozen=True, slots=True)
class TimedSample:
    sample: GpuSample
    at: datetime
    """Scrape time, or the latest timestamp the exporter wrote on the sample's lines."""
    lines: tuple[int, ...] = ()
    """The page lines the sample was made from."""


@dataclass(frozen=True, slots=True)
class ParseResult:
    samples: list[TimedSample]
    rejected: list[Rejected]
    blanks: int
    """Values DCGM marked as blank / not supported / NaN, kept as unknown (not rejected)."""
    ignored: list[int] = field(default_factory=list)
    """Sample lines of metrics no sample field needs (clocks, power, NVLink, ...)."""


@dataclass(slots=True)
class _Gpu:
    lines: dict[int, ExpositionLine] = field(default_factory=dict)
    series: dict[Series, list[tuple[int, Value]]] = field(default_factory=dict)
    times: dict[int, datetime] = field(default_factory=dict)


def _where(key: Key) -> str:
    node, index, instance = key
    return f"{clip(node, 80)} GPU {index}" + (
        f" instance {instance}" if instance is not None else ""
    )


def _xid_entries(line: ExpositionLine) -> list[tuple[Series, Value]]:
    """A DCGM_EXP_XID_ERRORS_COUNT line: one line per (GPU, XID) fired in the window, or one
    line of value 0 without ``xid`` when none fired."""
    raw_xid = L.first(line.labels, "xid")
    code = None if raw_xid is None else label_int(raw_xid, label="xid", field="xid")
    window = L.first(line.labels, WINDOW)
    span = None
    if window is not None and window.lstrip("0"):  # 0: the exporter gave no window
        span = label_int(window, label=WINDOW, field="xid_window_ms")
    series = (XID_COUNT, "" if code is None else str(code))
    entries: list[tuple[Series, Value]] = []
    if span is not None:
        entries.append(((WINDOW, ""), span))
    if is_blank(line.value):
        return [(series, None), *entries]
    try:
        count = check("count", line.value)
    except ValueError as exc:
        raise Refuse("value", str(exc)) from None
    if code is None and count:
        raise Refuse("labels", f"count {count} without an xid label")
    if code is not None:
        bounded("xid_counts", {code: count})
    return [(series, count), *entries]


def _entries(line: ExpositionLine) -> list[tuple[Series, Value]]:
    """What the line says, checked; Refuse when it cannot be right on its own."""
    if line.name == XID_COUNT:
        return _xid_entries(line)
    spec = FIELDS[line.name]
    if is_blank(line.value):
        return [((line.name, ""), None)]
    try:
        value = check(spec.kind, line.value)
    except ValueError as exc:
        raise Refuse("value", str(exc)) from None
    if value is not None and spec.kind != "flag":
        value = bounded(spec.slot, value, like=spec.like)
    return [((line.name, ""), value)]


class _Builder:
    def __init__(self, *, default_node: str | None, min_timestamp: datetime) -> None:
        self.default_node = default_node
        self.min_timestamp = min_timestamp
        self.gpus: dict[Key, _Gpu] = {}
        self.rejected: list[Rejected] = []
        self.ignored: list[int] = []
        self.blanks = 0

    def add(self, line: ExpositionLine) -> None:
        if line.name not in FIELDS and line.name != XID_COUNT:
            self.ignored.append(line.line_no)
            return
        try:
            key = gpu_key(line, self.default_node)
            at = line_time(line, floor=self.min_timestamp)
            entries = _entries(line)
        except Refuse as refused:
            name = clip(line.name, 80)
            self.rejected.append(
                Rejected(line.line_no, refused.kind, f"{name}: {refused.reason}", line.text)
            )
            return
        gpu = self.gpus.setdefault(key, _Gpu())
        gpu.lines[line.line_no] = line
        if at is not None:
            gpu.times[line.line_no] = at
        self.blanks += is_blank(line.value)
        for series, value in entries:
            gpu.series.setdefault(series, []).append((line.line_no, value))

    def _refuse(self, gpu: _Gpu, lines: list[int], kind: RejectKind, reason: str) -> None:
        raw = "\n".join(gpu.lines[no].text for no in lines)
        self.rejected.append(Rejected(lines[0], kind, reason, raw, tuple(lines[1:])))

    def _conflicts(self, key: Key, gpu: _Gpu) -> set[int]:
        """Lines of series that hold more than one value: which one is the card's cannot be
        told, so none is used (the last one used to win without a word); equal repeats (one
        line per pod on a shared card) are fine."""
        refused: set[int] = set()
        for (name, xid), all_entries in gpu.series.items():
            entries = [(no, value) for no, value in all_entries if no not in refused]
            if len({value for _, value in entries}) < 2:
                continue
            lines = sorted({no for no, _ in entries})
            shown = ", ".join(f"{value} on line {no}" for no, value in entries[:4])
            more = f" and {len(entries) - 4} more" if len(entries) > 4 else ""
            series = clip(name, 80) + (f"{{xid={xid}}}" if xid else "")
            reason = f"{_where(key)}: {series} has {len(entries)} values ({shown}{more})"
            self._refuse(gpu, lines, "conflicting_series", reason)
            refused.update(lines)
        return refused

    def samples(self, scraped_at: datetime) -> list[TimedSample]:
        out: list[TimedSample] = []
        for key, gpu in self.gpus.items():
            refused = self._conflicts(key, gpu)
            lines = sorted(no for no in gpu.lines if no not in refused)
            if not lines:
                continue
            try:
                sample = _sample(key, gpu, lines, refused)
            except ValidationError as exc:
                self._refuse(gpu, lines, kind_of(exc), f"{_where(key)}: {describe(exc)}")
                continue
            except Exception as exc:  # our bug on an input nobody foresaw: costs this GPU
                why = f"{_where(key)}: {type(exc).__name__}: {clip(str(exc))}"
                self._refuse(gpu, lines, "unexpected", why)
                continue
            at = max((gpu.times[no] for no in lines if no in gpu.times), default=scraped_at)
            out.append(TimedSample(sample, at, tuple(lines)))
        return out


def _sample(key: Key, gpu: _Gpu, lines: list[int], refused: set[int]) -> GpuSample:
    node, index, instance = key
    v: dict[str, Value] = {}
    xid_counts: dict[int, int] | None = None
    for (name, xid), entries in gpu.series.items():
        kept = [value for no, value in entries if no not in refused]
        if not kept or kept[0] is None:
            continue
        if name == XID_COUNT:
            xid_counts = {} if xid_counts is None else xid_counts
            if xid and kept[0]:
                xid_counts[int(xid)] = int(kept[0])
        elif name == WINDOW:
            v["xid_window_ms"] = kept[0]
        else:
            v[FIELDS[name].slot] = kept[0]
    labels = [gpu.lines[no].labels for no in lines]
    owners = {o for o in map(L.owner, labels) if o is not None}
    owner = next(iter(owners)) if len(owners) == 1 else None
    return GpuSample(
        node=node,
        gpu_index=index,
        uuid=_label(labels, L.UUID),
        model=_label(labels, "modelName"),
        memory_total_mib=_total(v),
        memory_used_mib=_float(v.get("memory_used_mib")),
        memory_reserved_mib=_float(v.get("memory_reserved_mib")),
        utilization_pct=_float(v.get("utilization_pct")),
        engine_active=_float(v.get("engine_active")),
        xid=_int(v.get("xid")) or None,  # 0: no XID since the driver loaded
        xid_from="gauge" if "xid" in v else None,
        mig_profile=_label(labels, "GPU_I_PROFILE") if instance is not None else None,
        mig_instance=instance,
        namespace=owner[0] if owner else None,
        pod=owner[1] if owner else None,
        container=owner[2] if owner else None,
        xid_counts=xid_counts,
        xid_window_ms=_int(v.get("xid_window_ms")),
        rows_remapped_correctable=_int(v.get("rows_remapped_correctable")),
        rows_remapped_uncorrectable=_int(v.get("rows_remapped_uncorrectable")),
        row_remap_pending=_bool(v.get("row_remap_pending")),
        row_remap_failed=_bool(v.get("row_remap_failed")),
        ecc_uncorrected_volatile=_int(v.get("ecc_uncorrected_volatile")),
    )


def _label(labels: list[dict[str, str]], names: tuple[str, ...] | str) -> str | None:
    return next((value for value in (L.first(x, names) for x in labels) if value), None)


def _float(value: Value) -> float | None:
    return None if value is None else float(value)


def _int(value: Value) -> int | None:
    return None if value is None else int(value)


def _bool(value: Value) -> bool | None:
    return None if value is None else bool(value)


def _total(v: dict[str, Value]) -> float | None:
    """DCGM's FB_TOTAL when exported; else used + free + reserved (DCGM's "used" leaves the
    driver's reservation out). Without the reservation the sum would understate the card, so
    the total stays unknown rather than guessed."""
    if v.get("memory_total_mib") is not None:
        return _float(v["memory_total_mib"])
    parts = [v.get("memory_used_mib"), v.get("memory_free_mib"), v.get("memory_reserved_mib")]
    if any(p is None for p in parts):
        return None
    return sum(float(p) for p in parts if p is not None)


REFUSED_LINES_MAX = 10_000
"""Unreadable lines after which the rest of a page is not read: an exporter page has some 24
sample lines per GPU (``plain_h200.txt``), so this is every line of a 400-GPU page refused.
Past it the page is the wrong thing (a binary file, an HTML error page of 16 MiB), and reading
on would cost one refusal (and one dead letter) per line: 5 million of them for 10 MB of
two-byte lines, 44 s and 1.2 GB."""


def _abandoned(rejected: list[Rejected], line_no: int) -> ParseResult:
    """The page refused whole: no sample is made from the lines before (a GPU's later lines
    would be missing from it), and the rest is named in one refusal, not read."""
    reason = (
        f"{REFUSED_LINES_MAX} lines refused by line {line_no}: the rest of the page is not "
        "read and none of it is used (is this a dcgm-exporter page?)"
    )
    rest = Rejected(line_no + 1, "syntax", reason)
    return ParseResult(samples=[], rejected=[*rejected, rest], blanks=0, ignored=[])


def parse_exposition(
    data: bytes | str,
    *,
    scraped_at: datetime,
    default_node: str | None = None,
    min_timestamp: datetime = MIN_TIMESTAMP,
) -> ParseResult:
    """Samples from one dcgm-exporter page. ``default_node`` names the node for lines without
    a ``Hostname`` label (exporters started with ``--no-hostname``, or a page saved from one
    node); line timestamps before ``min_timestamp`` are refused as implausible. Bad lines are
    returned as rejected, the rest still make samples; never raises."""
    builder = _Builder(default_node=default_node, min_timestamp=min_timestamp)
    rejected: list[Rejected] = []
    for item in read_lines(data):
        if isinstance(item, Rejected):
            rejected.append(item)
            if len(rejected) >= REFUSED_LINES_MAX:
                return _abandoned(rejected, item.line_no)
            continue
        try:
            builder.add(item)
        except Exception as exc:  # our bug on an input nobody foresaw: costs this line
            why = f"{clip(item.name, 80)}: {type(exc).__name__}: {clip(str(exc))}"
            rejected.append(Rejected(item.line_no, "unexpected", why, item.text))
    samples = builder.samples(scraped_at)
    rejected.extend(builder.rejected)
    rejected.sort(key=lambda r: r.line_no)
    return ParseResult(
        samples=samples, rejected=rejected, blanks=builder.blanks, ignored=builder.ignored
    )
