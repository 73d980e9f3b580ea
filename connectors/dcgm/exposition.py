"""Prometheus text exposition, read one line at a time so one bad line costs one line.

prometheus-client's parser stops at the first line it cannot read, which would drop a whole
scrape for one truncated label; fed a single line at a time it refuses just that line, and each
refusal is kept with its line number. Feeding lines alone also keeps counter names as the
exporter wrote them (given a ``# TYPE ... counter`` the parser renames samples to ``*_total``).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from prometheus_client.parser import text_string_to_metric_families

__all__ = ["ExpositionLine", "RejectKind", "Rejected", "read_lines"]

RejectKind = Literal["encoding", "syntax", "labels", "value", "timestamp"]
"""Why a line was refused, as a small fixed set (it labels a Prometheus counter)."""


@dataclass(frozen=True, slots=True)
class Rejected:
    line_no: int
    kind: RejectKind
    reason: str

    def __str__(self) -> str:
        return f"line {self.line_no}: {self.reason}"


@dataclass(frozen=True, slots=True)
class ExpositionLine:
    line_no: int
    name: str
    labels: dict[str, str]
    value: float
    """As the exporter wrote it: an int stays an int, so int64 sentinels compare exactly."""
    timestamp: datetime | None
    """The exporter's own timestamp for the line, when it gave one."""


def _text_lines(data: bytes | str) -> Iterator[tuple[int, str | None]]:
    if isinstance(data, str):
        for no, line in enumerate(data.splitlines(), 1):
            yield no, line
        return
    for no, raw in enumerate(data.split(b"\n"), 1):
        try:
            yield no, raw.decode("utf-8")
        except UnicodeDecodeError:
            yield no, None


def _clip(text: str, width: int = 60) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def read_lines(data: bytes | str) -> Iterator[ExpositionLine | Rejected]:
    """Every sample line of ``data`` parsed, or refused with its line number and reason;
    comments (``# HELP``, ``# TYPE``) and blank lines are skipped."""
    for no, line in _text_lines(data):
        if line is None:
            yield Rejected(no, "encoding", "not UTF-8 text")
            continue
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        try:
            samples = [s for family in text_string_to_metric_families(text) for s in family.samples]
        except Exception as exc:  # the parser raises ValueError, IndexError, ... on bad input
            detail = str(exc).split(": ", 1)[0] if str(exc) else type(exc).__name__
            yield Rejected(no, "syntax", f"unreadable sample ({detail}): {_clip(text)!r}")
            continue
        if len(samples) != 1:
            yield Rejected(no, "syntax", f"not one sample: {_clip(text)!r}")
            continue
        sample = samples[0]
        if math.isinf(sample.value):
            yield Rejected(no, "value", f"{sample.name}: infinite value {sample.value}")
            continue
        at: datetime | None = None
        if sample.timestamp is not None:
            try:
                at = datetime.fromtimestamp(float(sample.timestamp), UTC)
            except (OverflowError, OSError, ValueError):
                yield Rejected(no, "timestamp", f"{sample.name}: bad timestamp {sample.timestamp}")
                continue
        yield ExpositionLine(no, sample.name, dict(sample.labels), sample.value, at)
