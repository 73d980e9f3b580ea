"""Prometheus text exposition, read one line at a time so one bad line costs one line.

prometheus-client's parser stops at the first line it cannot read, which would drop a whole
scrape for one truncated label; fed a single line at a time it refuses just that line, and each
refusal is kept with its line number and text. Feeding lines alone also keeps counter names as
the exporter wrote them (given a ``# TYPE ... counter`` the parser renames samples to
``*_total``).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from prometheus_client.parser import text_string_to_metric_families

from connectors.dcgm.fast_line import SLOW_PARSE_MAX_CHARS, Parsed, parse_common

__all__ = ["ExpositionLine", "RejectKind", "Rejected", "clip", "read_lines"]

RejectKind = Literal[
    "encoding",
    "syntax",
    "labels",
    "value",
    "out_of_range",
    "implausible_time",
    "conflicting_series",
    "unexpected",
]
"""Why a line was refused, as a small fixed set: it labels two Prometheus counters (by endpoint
here, and ``gpufrag_refused_total``'s ``reason``), so its values must stay few."""


@dataclass(frozen=True, slots=True)
class Rejected:
    line_no: int
    kind: RejectKind
    reason: str
    raw: str = ""
    """The refused line(s) as the exporter wrote them, for the dead letter."""
    other_lines: tuple[int, ...] = ()
    """Lines refused together with ``line_no`` for one reason (two series that disagree, or
    every line of a GPU whose sample as a whole is impossible)."""

    @property
    def lines(self) -> tuple[int, ...]:
        return (self.line_no, *self.other_lines)

    def __str__(self) -> str:
        if not self.other_lines:
            return f"line {self.line_no}: {self.reason}"
        return f"lines {', '.join(map(str, self.lines))}: {self.reason}"


@dataclass(frozen=True, slots=True)
class ExpositionLine:
    line_no: int
    name: str
    labels: dict[str, str]
    value: float
    """As the exporter wrote it: an int stays an int, so int64 sentinels compare exactly."""
    timestamp_s: float | None
    """The exporter's own timestamp for the line in seconds (it writes milliseconds), when it
    gave one; checked for plausibility by the caller, which knows the floor."""
    text: str


def _split(data: bytes | str) -> Iterator[bytes | str]:
    """The lines one at a time: a 16 MiB page of 2-byte lines split at once was 8 million
    objects (some 500 MB) before the first was read."""
    sep = b"\n" if isinstance(data, bytes) else "\n"
    start = 0
    while True:
        end = data.find(sep, start)  # type: ignore[arg-type]
        if end < 0:
            yield data[start:]
            return
        yield data[start:end]
        start = end + 1


def _text_lines(data: bytes | str) -> Iterator[tuple[int, str, bool]]:
    """(line number, text, whether it was UTF-8); undecodable bytes come back replaced, so a
    refused line's dead letter still shows what arrived."""
    # Split on "\n" alone for both forms: str.splitlines() also splits on \x0b, \x1c, \u2028...,
    # which would number the lines of a str differently from the same bytes.
    for no, raw in enumerate(_split(data), 1):
        if isinstance(raw, str):
            yield no, raw, True
            continue
        try:
            yield no, raw.decode("utf-8"), True
        except UnicodeDecodeError:
            yield no, raw.decode("utf-8", "replace"), False


def clip(text: str, width: int = 60) -> str:
    """``text`` short enough for a one-line reason: a metric name or label value can be
    megabytes long and still be valid syntax."""
    return text if len(text) <= width else text[: width - 3] + "..."


def _finite(value: float) -> bool | None:
    """Whether ``value`` is finite; None for an int past any float (a 400-digit value), which
    no DCGM field (int64 or double) can hold and which ``math`` cannot even test."""
    try:
        return not math.isinf(value)
    except OverflowError:
        return None


def read_lines(data: bytes | str) -> Iterator[ExpositionLine | Rejected]:
    """Every sample line of ``data`` parsed, or refused with its line number and reason;
    comments (``# HELP``, ``# TYPE``) and blank lines are skipped. Never raises: an exception
    inside a generator would end it, losing every line after the one that raised."""
    for no, line, utf8 in _text_lines(data):
        if not utf8:
            yield Rejected(no, "encoding", "not UTF-8 text", line.strip())
            continue
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        try:
            yield _read_one(no, text)
        except Exception as exc:  # our own bug on an input nobody foresaw: costs this line
            yield Rejected(no, "unexpected", f"{type(exc).__name__}: {clip(str(exc))}", text)


def _slow(no: int, text: str) -> Parsed | Rejected:
    """prometheus-client's reading of a short line in an uncommon form."""
    if len(text) > SLOW_PARSE_MAX_CHARS:
        return Rejected(
            no,
            "syntax",
            f"unreadable sample (a {len(text)}-character line not of the form "
            f"name{{labels}} value [timestamp]): {clip(text)!r}",
            text,
        )
    samples = [s for family in text_string_to_metric_families(text) for s in family.samples]
    if len(samples) != 1:
        return Rejected(no, "syntax", f"not one sample: {clip(text)!r}", text)
    s = samples[0]
    return s.name, dict(s.labels), s.value, None if s.timestamp is None else float(s.timestamp)


def _read_one(no: int, text: str) -> ExpositionLine | Rejected:
    parsed: Parsed | Rejected | None
    try:
        parsed = parse_common(text)
        if parsed is None:
            parsed = _slow(no, text)
    except Exception as exc:  # the parsers raise ValueError, IndexError, ... on bad input
        detail = str(exc).split(": ", 1)[0] if str(exc) else type(exc).__name__
        return Rejected(no, "syntax", f"unreadable sample ({clip(detail)}): {clip(text)!r}", text)
    if isinstance(parsed, Rejected):
        return parsed
    name, labels, value, ts = parsed
    shown = clip(name, 80)
    finite = _finite(value)
    if finite is None:
        bits = int(value).bit_length()
        return Rejected(no, "out_of_range", f"{shown}: a {bits}-bit value, past any float", text)
    if not finite:
        return Rejected(no, "value", f"{shown}: infinite value {value}", text)
    return ExpositionLine(no, name, labels, value, ts, text)
