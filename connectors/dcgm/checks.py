"""Checks one exporter line can fail on its own: its labels, its timestamp, its value's range.

They run per line, at parse time, so a bad line costs that line and never its GPU's sample or
the page: a GPU index of 2**70 used to pass the parser and fail the whole envelope batch when
orjson met an int past 64 bits. The ranges are the sample's own (``GpuSample``'s fields, declared
in ``models.bounds``), so the parser cannot drift from what the model will accept.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ValidationError, create_model

from connectors.dcgm import labels as L
from connectors.dcgm.exposition import ExpositionLine, RejectKind, clip
from models import GpuSample
from models.bounds import TIME_MAX, TIME_MIN, describe

__all__ = ["Refuse", "bounded", "gpu_key", "kind_of", "label_int", "line_time"]

Key = tuple[str, int, int | None]  # node, GPU index, MIG instance

_BOUND_ERRORS = frozenset(
    {"less_than_equal", "greater_than_equal", "less_than", "greater_than", "finite_number"}
)
# 19 digits hold any int64; a longer label is out of every range here, and int() of a 5,000-digit
# string raises (Python's 4,300-digit limit) instead of giving a number to compare.
_MAX_LABEL_DIGITS = 19
_CHECKERS: dict[str, type[BaseModel]] = {}


class Refuse(Exception):
    """A line (or GPU) refused: ``kind`` is the stable code, ``reason`` the one-line why."""

    def __init__(self, kind: RejectKind, reason: str) -> None:
        super().__init__(reason)
        self.kind: RejectKind = kind
        self.reason = reason


def kind_of(exc: ValidationError) -> RejectKind:
    """Every error a bound: "out_of_range" (the value cannot be real). Otherwise "value": used
    above total is made of numbers each fine on its own."""
    bound = all(err["type"] in _BOUND_ERRORS for err in exc.errors())
    return "out_of_range" if bound else "value"


def _checker(name: str, like: str) -> type[BaseModel]:
    """A one-field model with ``GpuSample.<like>``'s type named ``name``, so a refusal names
    the field (``describe`` reads the field name from the error's location)."""
    checker = _CHECKERS.get(name)
    if checker is None:
        info = GpuSample.model_fields[like]
        fields: dict[str, Any] = {name: (info.annotation, info)}
        checker = create_model(f"_Check_{name}", __config__=GpuSample.model_config, **fields)
        _CHECKERS[name] = checker
    return checker


def bounded(name: str, value: object, *, like: str | None = None) -> Any:
    """``value`` as the sample field ``like`` (default ``name``) would hold it, or Refuse
    naming ``name`` and the range."""
    try:
        checked = _checker(name, like or name).model_validate({name: value})
    except ValidationError as exc:
        raise Refuse(kind_of(exc), describe(exc)) from None
    return getattr(checked, name)


def label_int(raw: str, *, label: str, field: str) -> int:
    """A label holding a number, bounded as the sample's ``field``. ASCII digits only:
    ``str.isdigit`` also accepts "٣" (which ``int`` reads as 3) and "²" (which it refuses)."""
    if not (raw.isascii() and raw.isdigit()):
        raise Refuse("labels", f"bad {label} label {clip(raw)!r}")
    if len(raw) > _MAX_LABEL_DIGITS:
        raise Refuse("out_of_range", f"{field}: {label} label has {len(raw)} digits, past 64 bits")
    value: int = bounded(field, int(raw))
    return value


def gpu_key(line: ExpositionLine, default_node: str | None) -> Key:
    """(node, GPU index, MIG instance) the line is about."""
    node = L.first(line.labels, L.NODE) or default_node
    if node is None:
        raise Refuse("labels", "no Hostname label and no default node given")
    raw = L.first(line.labels, "gpu")
    if raw is None:  # some exporters name the card only by its device file
        device = L.first(line.labels, "device") or ""
        raw = device.removeprefix("nvidia") if device.startswith("nvidia") else None
    if raw is None or not (raw.isascii() and raw.isdigit()):
        raise Refuse("labels", f"no GPU index (gpu={clip(raw or '')!r})")
    index = label_int(raw, label="gpu", field="gpu_index")
    instance = L.first(line.labels, "GPU_I_ID")
    if instance is None:
        return node, index, None
    if not (instance.isascii() and instance.isdigit()):
        raise Refuse("labels", f"bad MIG instance GPU_I_ID={clip(instance)!r}")
    return node, index, label_int(instance, label="GPU_I_ID", field="mig_instance")


def _shown(seconds: float) -> str:
    try:
        return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (OverflowError, OSError, ValueError):
        return "no date"


def line_time(line: ExpositionLine, *, floor: datetime) -> datetime | None:
    """The line's own timestamp, or None without one. Exposition timestamps are milliseconds;
    an exporter (or a script) writing seconds lands in January 1970, and 0 is no time at all,
    so anything before ``floor`` is refused rather than stored decades back."""
    seconds = line.timestamp_s
    if seconds is None:
        return None
    floor = max(floor, TIME_MIN)  # a floor set before 1970 must not let 1969 through
    low, high = floor.timestamp(), TIME_MAX.timestamp()
    if low <= seconds <= high:  # False for NaN too
        return datetime.fromtimestamp(seconds, UTC)
    ms = f"{seconds * 1000:.0f}"  # "nan" and "inf" too
    if seconds < low:
        where = f"before {floor:%Y-%m-%d}"
        hint = "; the exporter probably sent seconds" if low <= seconds * 1000 <= high else ""
    else:
        where = f"after {TIME_MAX:%Y-%m-%d}"
        hint = "; the exporter probably sent microseconds" if low <= seconds / 1000 <= high else ""
    raise Refuse(
        "implausible_time", f"timestamp {clip(ms, 24)} ms is {_shown(seconds)}, {where}{hint}"
    )
