"""Fuzzed exporter pages: valid lines mixed with garbage, huge numbers, odd labels, implausible
timestamps and duplicated series. Whatever comes in, the parser raises nothing, accounts for
every sample line exactly once (used, refused with a reason, or ignored), and every sample it
makes holds only values inside ``models.bounds`` and serializes."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import get_args

from hypothesis import given
from hypothesis import strategies as st

from connectors.dcgm import parse_exposition
from connectors.dcgm.blanks import is_blank
from connectors.dcgm.exposition import ExpositionLine, RejectKind, read_lines
from connectors.dcgm.fields import FIELDS, XID_COUNT
from connectors.dcgm.samples import ParseResult, TimedSample
from models import Envelope, GpuSample, GpuSampleEvent, from_json, to_json
from models.bounds import (
    COUNT_MAX,
    GPU_INDEX_MAX,
    GPU_MEMORY_MIB_MAX,
    MIG_INSTANCE_MAX,
    TIME_MAX,
    XID_CODE_MAX,
    XID_WINDOW_MS_MAX,
)
from tests.fuzzing import fuzz

SCRAPED = datetime(2026, 3, 2, 9, 30, tzinfo=UTC)
FLOOR = datetime(2015, 1, 1, tzinfo=UTC)
NOW_MS = int(SCRAPED.timestamp() * 1000)

EDGES = [
    "0", "1", "7", "63", "64", "255", "256", "9999", "10000", "604800000", "604800001",
    "1000000000", "1000000001", "1048576", "1048577", str(2**31 - 1), str(2**63 - 1), str(2**63),
    str(2**64), str(2**70), "9" * 19, "9" * 25, "-1", "٣", "²", "0x1", " 1", "1e3", "01", "1.0",
]  # fmt: skip
NUMBER_LABEL = st.one_of(st.integers(0, 70).map(str), st.sampled_from(EDGES))
VALUE = st.one_of(
    st.integers(-10, 2_000_000).map(str),
    st.integers(-(2**80), 2**80).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(
        [*EDGES, "NaN", "+Inf", "-Inf", "2147483632", "9223372036854775794", "140737488355328",
         "1e300", "9" * 400, "100", "100.5", "1.5", "0.5", "fast", "", "2"]
    ),
)  # fmt: skip
TIMESTAMP = st.one_of(
    st.none(),
    st.sampled_from(
        ["0", "-5", str(NOW_MS), str(NOW_MS // 1000), str(NOW_MS * 1000), str(NOW_MS + 1)]
    ),
    st.integers(-(2**70), 2**70).map(str),
)
METRIC = st.sampled_from([*FIELDS, XID_COUNT, XID_COUNT, "DCGM_FI_DEV_SM_CLOCK", "up"])


# Strategies are built once, here: one built inside a composite is built and validated again
# at every draw.
GPU_LABEL = st.one_of(st.none(), NUMBER_LABEL, st.just("2"))
OPTIONAL_LABELS = {
    "GPU_I_ID": NUMBER_LABEL,
    "Hostname": st.sampled_from(["n1", "n2", ""]),
    "UUID": st.sampled_from(["GPU-a", "GPU-b"]),
    "pod": st.sampled_from(["p1", "p2", ""]),
    "namespace": st.sampled_from(["ns", ""]),
    "xid": NUMBER_LABEL,
    "window_size_in_ms": st.one_of(NUMBER_LABEL, st.just("300000")),
    "exported_pod": st.sampled_from(["q1"]),
}
ONE_IN_FOUR = st.integers(0, 3)
SMALL_INDEX = st.integers(0, 2)
PLAIN_EXTRA = st.sampled_from(["", ',pod="p1",namespace="ns"', ',pod="p2",namespace="ns"'])
PLAIN_XID = st.sampled_from([13, 79])
PLAIN_VALUE = st.sampled_from(["0", "1", "5", "100", "0.5", "80000", "NaN"])
PLAIN_AT = st.sampled_from(["", f" {NOW_MS}", f" {NOW_MS - 500}"])


@st.composite
def labels(draw: st.DrawFn) -> str:
    parts: list[str] = []
    gpu = draw(GPU_LABEL)
    if gpu is not None:
        parts.append(f'gpu="{gpu}"')
    elif draw(st.booleans()):
        parts.append(f'device="nvidia{draw(NUMBER_LABEL)}"')
    for name, values in OPTIONAL_LABELS.items():
        if draw(ONE_IN_FOUR) == 0:
            parts.append(f'{name}="{draw(values)}"')
    return ",".join(parts)


@st.composite
def metric_line(draw: st.DrawFn) -> str:
    at = draw(TIMESTAMP)
    text = f"{draw(METRIC)}{{{draw(LABELS)}}} {draw(VALUE)}"
    return text if at is None else f"{text} {at}"


@st.composite
def plain_line(draw: st.DrawFn) -> str:
    """A line an exporter could write, so that pages make samples (and conflicts) often."""
    gpu = draw(SMALL_INDEX)
    extra = draw(PLAIN_EXTRA)
    if draw(st.booleans()):
        extra += f',GPU_I_ID="{draw(SMALL_INDEX)}"'
    name = draw(METRIC)
    if name == XID_COUNT:
        extra += f',xid="{draw(PLAIN_XID)}",window_size_in_ms="300000"'
    value = draw(PLAIN_VALUE)
    at = draw(PLAIN_AT)
    return f'{name}{{gpu="{gpu}",UUID="GPU-{gpu}",Hostname="n1"{extra}}} {value}{at}'


LABELS = labels()
LINE = st.one_of(
    plain_line(),
    plain_line(),
    metric_line(),
    metric_line(),
    st.text(max_size=40),
    st.sampled_from(["# HELP DCGM_FI_DEV_FB_USED x", "# TYPE DCGM_FI_DEV_FB_USED gauge", ""]),
)


@st.composite
def pages(draw: st.DrawFn) -> bytes:
    lines = draw(st.lists(LINE, max_size=25))
    for _ in range(draw(st.integers(0, 4))):  # repeat a line: identical, or with another value
        if lines:
            copy = draw(st.sampled_from(lines))
            if draw(st.booleans()) and "} " in copy:
                copy = copy.rsplit("} ", 1)[0] + "} " + draw(VALUE)
            lines.insert(draw(st.integers(0, len(lines))), copy)
    data = "\n".join(lines).encode("utf-8", "surrogatepass")
    if draw(st.booleans()):
        data += b"\n" + draw(st.binary(max_size=30))
    return data


def _sample_lines(data: bytes | str) -> dict[int, str]:
    """Line number -> text of every line that is neither blank nor a comment (or is not UTF-8),
    worked out here from the input rather than by the parser under test."""
    out: dict[int, str] = {}
    raws = data.split(b"\n") if isinstance(data, bytes) else data.split("\n")
    for no, raw in enumerate(raws, 1):
        try:
            text = (raw.decode("utf-8") if isinstance(raw, bytes) else raw).strip()
        except UnicodeDecodeError:
            out[no] = ""  # refused as a whole line: never part of a sample
            continue
        if text and not text.startswith("#"):
            out[no] = text

    return out


def _in_bounds(timed: TimedSample) -> None:
    s = timed.sample
    assert GpuSample.model_validate(s.model_dump()) == s
    assert 0 <= s.gpu_index <= GPU_INDEX_MAX
    assert s.mig_instance is None or 0 <= s.mig_instance <= MIG_INSTANCE_MAX
    for mib in (s.memory_total_mib, s.memory_used_mib, s.memory_reserved_mib):
        assert mib is None or (math.isfinite(mib) and 0 <= mib <= GPU_MEMORY_MIB_MAX)
    assert s.utilization_pct is None or 0 <= s.utilization_pct <= 100
    assert s.engine_active is None or 0 <= s.engine_active <= 1
    assert s.xid is None or 0 <= s.xid <= XID_CODE_MAX
    for code, count in (s.xid_counts or {}).items():
        assert 0 <= code <= XID_CODE_MAX and 0 <= count <= COUNT_MAX
    assert s.xid_window_ms is None or 1 <= s.xid_window_ms <= XID_WINDOW_MS_MAX
    for rows in (s.rows_remapped_correctable, s.rows_remapped_uncorrectable):
        assert rows is None or 0 <= rows <= COUNT_MAX
    assert timed.at == SCRAPED or FLOOR <= timed.at <= TIME_MAX
    env = Envelope.wrap(GpuSampleEvent(sample=s), event_time=timed.at, source="dcgm")
    assert from_json(Envelope, to_json(env)) == env  # fits 64 bits and JSON


def _one_value_per_series(timed: TimedSample, texts: dict[int, str]) -> None:
    """No series of a sample had two values (the last one used to win without a word)."""
    seen: dict[tuple[str, str | None], set[object]] = {}
    for no in timed.lines:
        (line,) = read_lines(texts[no])
        assert isinstance(line, ExpositionLine)
        value = None if is_blank(line.value) else line.value
        seen.setdefault((line.name, line.labels.get("xid")), set()).add(value)
    assert all(len(values) == 1 for values in seen.values()), seen


def _accounted(result: ParseResult, data: bytes | str) -> None:
    texts = _sample_lines(data)
    used = [no for t in result.samples for no in t.lines]
    refused = [no for r in result.rejected for no in r.lines]
    every = used + refused + result.ignored
    assert len(every) == len(set(every)), "a line counted twice"
    assert set(every) == set(texts), "a line neither used, refused nor ignored"
    for item in result.rejected:
        assert item.kind in get_args(RejectKind)
        assert item.reason and "\n" not in item.reason and len(item.reason) < 1000
    for timed in result.samples:
        _in_bounds(timed)
        _one_value_per_series(timed, texts)


@fuzz
@given(data=pages(), node=st.sampled_from([None, "dflt"]))
def test_any_page_is_parsed_refused_or_ignored_line_by_line(data: bytes, node: str | None) -> None:
    result = parse_exposition(data, scraped_at=SCRAPED, default_node=node, min_timestamp=FLOOR)
    _accounted(result, data)


@fuzz
@given(text=st.text(max_size=200))
def test_any_text_never_raises(text: str) -> None:
    result = parse_exposition(text, scraped_at=SCRAPED, default_node="n")
    _accounted(result, text)
