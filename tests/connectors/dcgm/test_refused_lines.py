"""Lines no real exporter can write are refused one by one, with a reason naming the field; the
page's other lines, and the same GPU's other lines, still make samples."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from connectors.dcgm import parse_exposition
from connectors.dcgm.exposition import read_lines
from tests.connectors.dcgm.helpers import SCRAPED, by_gpu, page, parse

BIG = 2**70
H200 = 'UUID="GPU-x",modelName="NVIDIA H200",Hostname="n1"'


def line(name: str, value: str, labels: str = 'gpu="0"', *, at: str = "") -> str:
    return f"{name}{{{labels},{H200}}} {value}{' ' + at if at else ''}\n"


def good(gpu: int) -> str:
    return line("DCGM_FI_DEV_FB_USED", "1024", f'gpu="{gpu}"') + line(
        "DCGM_FI_DEV_GPU_UTIL", "50", f'gpu="{gpu}"'
    )


@pytest.mark.parametrize(
    ("bad", "kind", "words"),
    [
        (line("DCGM_FI_DEV_FB_USED", "1", f'gpu="{BIG}"'), "out_of_range", "gpu_index"),
        (line("DCGM_FI_DEV_FB_USED", "1", 'gpu="64"'), "out_of_range", "gpu_index"),
        (line("DCGM_FI_DEV_FB_USED", "1", f'gpu="0",GPU_I_ID="{BIG}"'), "out_of_range", "mig_"),
        (line("DCGM_FI_DEV_FB_USED", "1", 'gpu="0",GPU_I_ID="256"'), "out_of_range", "mig_"),
        (line("DCGM_FI_DEV_FB_USED", "1", 'gpu="' + "9" * 5000 + '"'), "out_of_range", "digits"),
        (line("DCGM_FI_DEV_FB_USED", "1", 'gpu="٣"'), "labels", "GPU index"),
        (line("DCGM_FI_DEV_FB_USED", "1", 'gpu="²"'), "labels", "GPU index"),
        (line("DCGM_FI_DEV_FB_USED", "9" * 400), "out_of_range", "past any float"),
        (line("DCGM_FI_DEV_FB_USED", "1048577"), "out_of_range", "memory_used_mib"),
        (line("DCGM_FI_DEV_FB_FREE", "2000000"), "out_of_range", "memory_free_mib"),
        (line("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "1000000001"), "out_of_range", "rows_"),
        (line("DCGM_FI_DEV_XID_ERRORS", "10000"), "out_of_range", "xid"),
        (line("DCGM_EXP_XID_ERRORS_COUNT", "1", f'gpu="0",xid="{BIG}"'), "out_of_range", "xid"),
        (line("DCGM_EXP_XID_ERRORS_COUNT", "1", 'gpu="0",xid="10000"'), "out_of_range", "xid"),
        (
            line("DCGM_EXP_XID_ERRORS_COUNT", "1", f'gpu="0",xid="13",window_size_in_ms="{BIG}"'),
            "out_of_range",
            "xid_window_ms",
        ),
        (
            line("DCGM_EXP_XID_ERRORS_COUNT", "2000000000", 'gpu="0",xid="13"'),
            "out_of_range",
            "xid",
        ),
        (line("DCGM_EXP_XID_ERRORS_COUNT", "3"), "labels", "without an xid"),
    ],
)
def test_a_bad_line_costs_that_line_only(bad: str, kind: str, words: str) -> None:
    # The bad line comes first: it used to cost every GPU listed after it.
    result = parse(bad + good(0) + good(1))
    assert [(r.line_no, r.kind) for r in result.rejected] == [(1, kind)]
    assert words in result.rejected[0].reason and "\n" not in result.rejected[0].reason
    assert result.rejected[0].raw == bad.strip()
    gpus = by_gpu(result)
    assert set(gpus) == {(0, None), (1, None)}
    assert all(s.memory_used_mib == 1024.0 and s.utilization_pct == 50.0 for s in gpus.values())


def test_seconds_for_milliseconds_are_refused_with_the_hint() -> None:
    sent = int(datetime(2026, 3, 2, 9, 0, tzinfo=UTC).timestamp())
    result = parse(
        line("DCGM_FI_DEV_FB_USED", "1", at=str(sent))
        + line("DCGM_FI_DEV_GPU_UTIL", "2", at="0")
        + line("DCGM_FI_DEV_FB_FREE", "3", at=str(sent * 1_000_000))
        + line("DCGM_FI_DEV_FB_RESERVED", "4", at=str(sent * 1000))
    )
    assert [(r.line_no, r.kind) for r in result.rejected] == [
        (1, "implausible_time"),
        (2, "implausible_time"),
        (3, "implausible_time"),
    ]
    seconds, zero, micro = (r.reason for r in result.rejected)
    assert "1970-01-21" in seconds and "probably sent seconds" in seconds
    assert "1970-01-01" in zero and "probably" not in zero  # 0 is no time in any unit
    assert "probably sent microseconds" in micro
    (timed,) = result.samples  # the line in milliseconds is fine
    assert timed.at == datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
    assert timed.sample.memory_reserved_mib == 4.0 and timed.sample.memory_used_mib is None
    assert timed.lines == (4,)


def test_the_floor_is_a_setting() -> None:
    text = line("DCGM_FI_DEV_FB_USED", "1", at="1262304000000")  # 2010-01-01
    assert parse(text).rejected[0].kind == "implausible_time"
    later = parse_exposition(
        text, scraped_at=SCRAPED, min_timestamp=datetime(2001, 1, 1, tzinfo=UTC)
    )
    assert later.rejected == [] and later.samples[0].at.year == 2010
    # a floor before 1970 still keeps what an envelope cannot hold out
    negative = line("DCGM_FI_DEV_FB_USED", "1", at="-5000")
    early = parse_exposition(
        negative, scraped_at=SCRAPED, min_timestamp=datetime(1900, 1, 1, tzinfo=UTC)
    )
    assert [r.kind for r in early.rejected] == ["implausible_time"]


def test_series_that_disagree_are_refused_together_and_the_rest_is_kept() -> None:
    result = parse(
        line("DCGM_FI_DEV_FB_USED", "100")  # 1
        + line("DCGM_FI_DEV_GPU_UTIL", "7")  # 2
        + line("DCGM_FI_DEV_FB_USED", "200")  # 3: the same series, another value
        + line("DCGM_FI_DEV_GPU_UTIL", "7")  # 4: an identical repeat is fine
        + good(1)  # 5, 6
    )
    (conflict,) = result.rejected
    assert (conflict.kind, conflict.lines) == ("conflicting_series", (1, 3))
    assert str(conflict).startswith("lines 1, 3: n1 GPU 0: DCGM_FI_DEV_FB_USED has 2 values")
    assert "100.0 on line 1, 200.0 on line 3" in conflict.reason
    assert conflict.raw.splitlines() == [
        line("DCGM_FI_DEV_FB_USED", "100").strip(),
        line("DCGM_FI_DEV_FB_USED", "200").strip(),
    ]
    gpus = {t.sample.gpu_index: t for t in result.samples}
    assert gpus[0].sample.memory_used_mib is None  # unknown, not the last one written
    assert gpus[0].sample.utilization_pct == 7.0 and gpus[0].lines == (2, 4)
    assert gpus[1].sample.memory_used_mib == 1024.0


def test_disagreeing_pods_and_windows_are_conflicts_too() -> None:
    pod = 'gpu="0",namespace="ns",pod="a"'
    other = 'gpu="0",namespace="ns",pod="b"'
    xid = 'gpu="0",xid="13",window_size_in_ms="300000"'
    xid_other_window = 'gpu="0",xid="79",window_size_in_ms="60000"'
    result = parse(
        line("DCGM_FI_DEV_FB_USED", "100", pod)
        + line("DCGM_FI_DEV_FB_USED", "100", pod)  # the exporter repeating itself: fine
        + line("DCGM_FI_DEV_FB_USED", "300", other)  # the card has one used memory
        + line("DCGM_EXP_XID_ERRORS_COUNT", "1", xid)
        + line("DCGM_EXP_XID_ERRORS_COUNT", "2", xid_other_window)
        + line("DCGM_FI_DEV_GPU_UTIL", "5", pod)
    )
    assert [(r.kind, r.lines) for r in result.rejected] == [
        ("conflicting_series", (1, 2, 3)),
        ("conflicting_series", (4, 5)),
    ]
    assert "window_size_in_ms has 2 values" in result.rejected[1].reason
    (timed,) = result.samples
    assert timed.lines == (6,) and timed.sample.pod == "a"
    assert timed.sample.xid_counts is None and timed.sample.xid_window_ms is None


def test_a_sample_impossible_as_a_whole_costs_its_gpu_and_names_every_line() -> None:
    result = parse(
        line("DCGM_FI_DEV_FB_TOTAL", "100")
        + line("DCGM_FI_DEV_FB_USED", "1024")
        + line("DCGM_FI_DEV_FB_USED", "1", 'gpu="1"')
    )
    (whole,) = result.rejected
    assert (whole.kind, whole.lines) == ("value", (1, 2))
    assert "exceeds" in whole.reason and len(whole.raw.splitlines()) == 2
    assert [t.sample.gpu_index for t in result.samples] == [1]
    # used + free + reserved past 1 TiB: each line in range, the sum is not
    summed = parse(
        line("DCGM_FI_DEV_FB_USED", "1000000")
        + line("DCGM_FI_DEV_FB_FREE", "1000000")
        + line("DCGM_FI_DEV_FB_RESERVED", "1")
    )
    assert [(r.kind, r.lines) for r in summed.rejected] == [("out_of_range", (1, 2, 3))]
    assert "memory_total_mib" in summed.rejected[0].reason


def test_an_unforeseen_exception_costs_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    import connectors.dcgm.samples as samples

    real = samples.gpu_key

    def flaky(line, default_node):  # type: ignore[no-untyped-def]
        if line.line_no == 2:
            raise RuntimeError("a bug")
        return real(line, default_node)

    monkeypatch.setattr(samples, "gpu_key", flaky)
    result = parse(good(0) + good(1))
    assert [(r.line_no, r.kind) for r in result.rejected] == [(2, "unexpected")]
    assert "RuntimeError: a bug" in result.rejected[0].reason
    assert len(result.samples) == 2


@pytest.mark.parametrize(
    "name",
    [
        "plain_h200.txt",
        "kubernetes_pods.txt",
        "federated_exported_labels.txt",
        "mig_a100.txt",
        "xid_h100.txt",
        "blanks_a100.txt",
        "malformed_h200.txt",
    ],
)
def test_every_line_of_a_fixture_is_used_refused_or_ignored_once(name: str) -> None:
    data = page(name)
    result = parse(data)
    used = [no for t in result.samples for no in t.lines]
    refused = [no for r in result.rejected for no in r.lines]
    seen = used + refused + result.ignored
    assert len(seen) == len(set(seen))
    expected = {item.line_no for item in read_lines(data)}
    assert set(seen) == expected
